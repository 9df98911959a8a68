//! The one table renderer of srpctl's listings (target and host alike): rows under a
//! header, columns padded to their widest cell (counted in characters, so names with
//! non-ASCII letters line up), trailing blanks trimmed.

/// `rows` under `header`, one line each.
pub(crate) fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (w, cell) in width.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&width)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    for r in rows {
        out.push_str(&line(r));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::table;

    #[test]
    fn columns_line_up_by_characters() {
        let t = table(
            &["NAME", "STATE"],
            vec![
                vec!["vol1".into(), "up".into()],
                vec!["volüme-2".into(), "down".into()],
                vec!["x".into(), String::new()],
            ],
        );
        assert_eq!(
            t, "NAME      STATE\nvol1      up\nvolüme-2  down\nx\n",
            "{t}"
        );
    }
}
