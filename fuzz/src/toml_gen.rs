//! TOML-ish text from the input: table headers and `key = value` lines drawn from a
//! config's schema (each key with values that are right, nearly right and wrong), mixed
//! with keys and headers of other tables, values of any type, and junk lines. Reaches the
//! validation of a config much faster than arbitrary text, which is mostly a syntax error.

use crate::input::Input;

/// A table of a config: its header name, whether it is an array of tables, and each key
/// with candidate values (as TOML source).
pub type Table = (
    &'static str,
    bool,
    &'static [(&'static str, &'static [&'static str])],
);

/// A value of any TOML type, from the input.
fn any_value(input: &mut Input<'_>) -> String {
    match input.below(8) {
        0 => i64::from_be_bytes(input.u64().to_be_bytes()).to_string(),
        1 => u64::from(input.u16()).to_string(),
        2 => input.bool().to_string(),
        3 => "[]".into(),
        4 => "{}".into(),
        5 => "1979-05-27T07:32:00Z".into(),
        _ => {
            let n = input.below(24);
            let s = String::from_utf8_lossy(input.bytes(n)).into_owned();
            toml::Value::String(s).to_string()
        }
    }
}

/// TOML text for the tables of `schema`.
pub fn text(input: &mut Input<'_>, schema: &[Table]) -> String {
    let mut out = String::new();
    let mut table = 0;
    let mut lines = 0;
    while !input.is_empty() && lines < 128 {
        lines += 1;
        match input.below(16) {
            0 => {
                // A junk line.
                let n = input.below(32);
                out.push_str(&String::from_utf8_lossy(input.bytes(n)));
            }
            1..=3 => {
                table = input.below(schema.len());
                let (name, array, _) = schema[table];
                // Sometimes the wrong form of header.
                if array != (input.below(8) == 0) {
                    out.push_str(&format!("[[{name}]]"));
                } else {
                    out.push_str(&format!("[{name}]"));
                }
            }
            4 => {
                // A key of another table, here.
                let (_, _, keys) = schema[input.below(schema.len())];
                let (key, values) = keys[input.below(keys.len())];
                out.push_str(&format!("{key} = {}", input.pick(values)));
            }
            5 => {
                let (_, _, keys) = schema[table];
                let (key, _) = keys[input.below(keys.len())];
                out.push_str(&format!("{key} = {}", any_value(input)));
            }
            6 => {
                let n = 1 + input.below(12);
                let key = String::from_utf8_lossy(input.bytes(n)).into_owned();
                out.push_str(&format!(
                    "{} = {}",
                    toml::Value::String(key),
                    any_value(input)
                ));
            }
            _ => {
                let (_, _, keys) = schema[table];
                let (key, values) = keys[input.below(keys.len())];
                out.push_str(&format!("{key} = {}", input.pick(values)));
            }
        }
        out.push('\n');
    }
    out
}
