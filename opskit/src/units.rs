//! Sizes and durations as operators write them in configuration files — one parser for
//! the target's and the host's.

use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::String;
use core::time::Duration;

/// Why a size did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// Not digits with a known unit.
    #[error(
        "invalid size {0:?}: expected digits with an optional unit (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB), as \"64MiB\""
    )]
    Syntax(String),
    /// More than 2^64 - 1 bytes.
    #[error("size {0:?} is too large")]
    TooLarge(String),
}

/// Bytes in `text`: digits with an optional unit, binary (`KiB` `MiB` `GiB` `TiB`) or
/// decimal (`KB` `MB` `GB` `TB`), a space allowed between (`"256KiB"`, `"10 GB"`, `"4096"`).
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let multiplier: u64 = match unit.trim_start() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        _ => return Err(SizeError::Syntax(text.to_owned())),
    };
    if digits.is_empty() {
        return Err(SizeError::Syntax(text.to_owned()));
    }
    // Too many digits for u64 is "too large", not "bad syntax".
    let too_large = || SizeError::TooLarge(text.to_owned());
    let n: u64 = digits.parse().map_err(|_| too_large())?;
    n.checked_mul(multiplier).ok_or_else(too_large)
}

/// A duration as the daemons' config files write it: digits with a unit `ms`, `s`, `m` or
/// `h` (`"500ms"`, `"15s"`, `"10m"`); the error says what was expected.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits.parse().map_err(|_| {
        format!("invalid duration {text:?}: expected e.g. \"500ms\", \"15s\", \"10m\"")
    })?;
    let d = match unit.trim() {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.saturating_mul(60)),
        "h" => Duration::from_secs(n.saturating_mul(3600)),
        _ => {
            return Err(format!(
                "invalid duration {text:?}: the unit must be ms, s, m or h"
            ));
        }
    };
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_binary_and_decimal() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("256KiB"), Ok(256 << 10));
        assert_eq!(parse_size(" 10 GB "), Ok(10_000_000_000));
        assert_eq!(parse_size("1TiB"), Ok(1 << 40));
        assert_eq!(parse_size("64MB"), Ok(64_000_000));
        assert!(matches!(parse_size("KiB"), Err(SizeError::Syntax(_))));
        assert!(matches!(
            parse_size("12 parsecs"),
            Err(SizeError::Syntax(_))
        ));
        assert!(matches!(
            parse_size("99999999999999999999"),
            Err(SizeError::TooLarge(_))
        ));
        assert!(matches!(
            parse_size("20000000TiB"),
            Err(SizeError::TooLarge(_))
        ));
    }
}
