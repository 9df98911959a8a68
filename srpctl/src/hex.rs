//! Reading bytes the way operators paste them, and printing them back as a hex dump.

use anyhow::{Context, Result, bail};
use std::fmt::Write as _;
use std::io::Read;
use std::path::Path;

/// Parses hex text: whitespace, `:`, `,`, `0x` prefixes and `//`/`#` comments are ignored.
pub(crate) fn parse_hex(text: &str) -> Result<Vec<u8>> {
    let mut digits = String::new();
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or("");
        let line = line.split('#').next().unwrap_or("");
        for token in line.split(|c: char| c.is_whitespace() || c == ',' || c == ':') {
            let token = token.trim_start_matches("0x").trim_start_matches("0X");
            digits.push_str(token);
        }
    }
    if let Some(bad) = digits.chars().find(|c| !c.is_ascii_hexdigit()) {
        bail!("not a hex digit: {bad:?}");
    }
    if digits.len() % 2 != 0 {
        bail!("odd number of hex digits ({})", digits.len());
    }
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).context("hex byte"))
        .collect()
}

/// The input bytes: `--hex` text, raw bytes from a file, or hex text from stdin (`-`).
pub(crate) fn read_input(hex: Option<&str>, file: Option<&Path>) -> Result<Vec<u8>> {
    match (hex, file) {
        (Some(text), None) => parse_hex(text),
        (None, Some(p)) if p == Path::new("-") => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .context("reading stdin")?;
            parse_hex(&s)
        }
        (None, Some(p)) => std::fs::read(p).with_context(|| format!("reading {}", p.display())),
        (Some(_), Some(_)) => bail!("give either --hex or a file, not both"),
        (None, None) => {
            bail!("no input: give --hex HEX, a file of raw bytes, or - for hex on stdin")
        }
    }
}

/// A hex dump, 16 bytes a line, offsets on the left.
pub(crate) fn dump(bytes: &[u8]) -> String {
    let mut out = String::new();
    for (i, chunk) in bytes.chunks(16).enumerate() {
        let _ = write!(out, "  {:04x}:", i * 16);
        for b in chunk {
            let _ = write!(out, " {b:02x}");
        }
        out.push('\n');
    }
    out
}

/// `bytes` as lower-case hex digits, no separators (GIDs, port IDs, NAA designators).
pub(crate) fn to_hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .fold(String::with_capacity(2 * bytes.len()), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_forms_operators_paste() {
        assert_eq!(
            parse_hex("c1 00:0x02,03 // tail").ok(),
            Some(vec![0xc1, 0, 2, 3])
        );
        assert_eq!(parse_hex("ab\ncd # comment\n").ok(), Some(vec![0xab, 0xcd]));
        assert!(parse_hex("abc").is_err());
        assert!(parse_hex("zz").is_err());
        assert_eq!(dump(&[1, 2]), "  0000: 01 02\n");
    }
}
