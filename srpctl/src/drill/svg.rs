//! The drill's picture: a hand-written SVG timeline. x is time in seconds; the IOPS of each
//! path (from the host's counters) are stacked areas, the workload's own IOPS a dashed
//! line over them; the fault is a shaded band between the inject and restore markers, and
//! the longest stall a red bar on the time axis.

use super::report::{Report, path_iops, per_second};
use std::fmt::Write;

const W: f64 = 960.0;
const H: f64 = 420.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;
const COLORS: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#bab0ac",
];

/// Text for SVG content and attributes.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A round step giving about `n` ticks over `span`.
fn step(span: f64, n: f64) -> f64 {
    let raw = (span / n).max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

/// The picture of `r`.
pub(crate) fn render(r: &Report) -> String {
    let end_s = (r.end_us as f64 / 1e6).max(1.0);
    let total = per_second(&r.done, r.end_us);
    let paths = path_iops(&r.samples, r.end_us);
    let seconds = total.len();
    let stacked_max = (0..seconds)
        .map(|i| {
            paths
                .values()
                .map(|v| v.get(i).copied().unwrap_or(0.0))
                .sum::<f64>()
        })
        .fold(0.0, f64::max);
    let total_max = total.iter().copied().max().unwrap_or(0) as f64;
    let y_step = step(stacked_max.max(total_max).max(1.0), 5.0);
    let y_max = (stacked_max.max(total_max).max(1.0) / y_step).ceil() * y_step;
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let x = |s: f64| LEFT + s.clamp(0.0, end_s) / end_s * pw;
    let y = |v: f64| TOP + ph - v / y_max * ph;
    let us = |t: u64| t as f64 / 1e6;

    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        o,
        r#"<rect x="0" y="0" width="{W}" height="{H}" fill="white"/>"#
    );
    let _ = writeln!(
        o,
        r#"<text x="{LEFT}" y="20" font-size="15" font-weight="bold">{}</text><text x="{LEFT}" y="38" font-size="11">{}</text>"#,
        esc(&format!("failover drill, {}: {}", r.policy, r.fault)),
        esc(&format!("disk {}", r.disk))
    );
    // The fault band, under everything.
    let (fx0, fx1) = (x(us(r.inject_us)), x(us(r.restore_us)));
    let _ = writeln!(
        o,
        r##"<rect id="fault" x="{fx0:.1}" y="{TOP}" width="{:.1}" height="{ph}" fill="#e15759" fill-opacity="0.12"/>"##,
        (fx1 - fx0).max(0.0)
    );
    // Axes, ticks and grid.
    let _ = writeln!(o, r#"<g id="axes" stroke="black">"#);
    let _ = writeln!(
        o,
        r#"<line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}"/>"#,
        TOP + ph,
        LEFT + pw,
        TOP + ph
    );
    let _ = writeln!(
        o,
        r#"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{:.1}"/>"#,
        TOP + ph
    );
    let _ = writeln!(o, "</g>");
    let _ = writeln!(o, r##"<g id="ticks" fill="#333">"##);
    let x_step = step(end_s, 10.0);
    let mut t = 0.0;
    while t <= end_s + 1e-9 {
        let _ = writeln!(
            o,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            x(t),
            TOP + ph + 16.0,
            t
        );
        t += x_step;
    }
    let mut v = 0.0;
    while v <= y_max + 1e-9 {
        let _ = writeln!(
            o,
            r##"<line x1="{LEFT}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="#ddd"/><text x="{2:.1}" y="{3:.1}" text-anchor="end">{4}</text>"##,
            y(v),
            LEFT + pw,
            LEFT - 6.0,
            y(v) + 4.0,
            v
        );
        v += y_step;
    }
    let _ = writeln!(
        o,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">time (s)</text>"#,
        LEFT + pw / 2.0,
        H - 12.0
    );
    let _ = writeln!(
        o,
        r#"<text x="16" y="{:.1}" transform="rotate(-90 16 {:.1})" text-anchor="middle">IOPS</text>"#,
        TOP + ph / 2.0,
        TOP + ph / 2.0
    );
    let _ = writeln!(o, "</g>");
    // Stacked areas, one per path; each second's value drawn at the second's middle.
    let mut base = vec![0.0; seconds];
    for (n, (session, series)) in paths.iter().enumerate() {
        let top: Vec<f64> = (0..seconds)
            .map(|i| base[i] + series.get(i).copied().unwrap_or(0.0))
            .collect();
        let mut pts = String::new();
        for (i, v) in top.iter().enumerate() {
            let _ = write!(pts, "{:.1},{:.1} ", x(i as f64 + 0.5), y(*v));
        }
        for i in (0..seconds).rev() {
            let _ = write!(pts, "{:.1},{:.1} ", x(i as f64 + 0.5), y(base[i]));
        }
        let color = COLORS[n % COLORS.len()];
        let _ = writeln!(
            o,
            r#"<polygon id="path-{session}" points="{}" fill="{color}" fill-opacity="0.75" stroke="{color}"/>"#,
            pts.trim_end()
        );
        base = top;
    }
    // The workload's own count.
    let mut pts = String::new();
    for (i, v) in total.iter().enumerate() {
        let _ = write!(pts, "{:.1},{:.1} ", x(i as f64 + 0.5), y(*v as f64));
    }
    let _ = writeln!(
        o,
        r#"<polyline id="total" points="{}" fill="none" stroke="black" stroke-width="1.5" stroke-dasharray="5,3"/>"#,
        pts.trim_end()
    );
    // Inject and restore markers.
    for (id, at, label) in [("inject", fx0, "inject"), ("restore", fx1, "restore")] {
        let _ = writeln!(
            o,
            r##"<line id="{id}" x1="{at:.1}" y1="{TOP}" x2="{at:.1}" y2="{:.1}" stroke="#c00" stroke-width="1.5"/><text x="{:.1}" y="{:.1}" fill="#c00">{label}</text>"##,
            TOP + ph,
            at + 3.0,
            TOP + 12.0
        );
    }
    // The longest stall.
    let stall = r.stall();
    let (sx0, sx1) = (x(us(stall.start_us)), x(us(stall.start_us + stall.len_us)));
    let _ = writeln!(
        o,
        r##"<rect id="stall" x="{sx0:.1}" y="{:.1}" width="{:.1}" height="6" fill="#d00"/><text x="{sx0:.1}" y="{:.1}" fill="#d00">max stall {:.1} ms</text>"##,
        TOP + ph - 6.0,
        (sx1 - sx0).max(1.5),
        TOP + ph + 32.0,
        stall.len_us as f64 / 1000.0
    );
    // Legend.
    let lx = LEFT + pw + 16.0;
    let _ = writeln!(o, r#"<g id="legend">"#);
    let mut ly = TOP + 10.0;
    for (n, session) in paths.keys().enumerate() {
        let color = COLORS[n % COLORS.len()];
        let mark = if *session == r.session {
            " (faulted)"
        } else {
            ""
        };
        let _ = writeln!(
            o,
            r#"<rect x="{lx:.1}" y="{:.1}" width="12" height="12" fill="{color}"/><text x="{:.1}" y="{:.1}">path {session}{mark}</text>"#,
            ly - 10.0,
            lx + 18.0,
            ly
        );
        ly += 20.0;
    }
    let _ = writeln!(
        o,
        r#"<line x1="{lx:.1}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="black" stroke-dasharray="5,3"/><text x="{2:.1}" y="{3:.1}">workload total</text>"#,
        ly - 4.0,
        lx + 12.0,
        lx + 18.0,
        ly
    );
    ly += 20.0;
    let _ = writeln!(
        o,
        r#"<text x="{lx:.1}" y="{ly:.1}">errors {} mismatches {}</text>"#,
        r.errors(),
        r.mismatches()
    );
    let _ = writeln!(o, "</g>");
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drill::sampler::{PathSample, Sample};
    use serde_json::json;

    fn report() -> Report {
        let samples = (0..=25u64)
            .map(|i| Sample {
                at_us: i * 200_000,
                queued: 0,
                paths: vec![
                    PathSample {
                        session: 1,
                        target: "ioc1".into(),
                        ops: i.min(10) * 100,
                        state: if i > 10 { "admin-down" } else { "active" }.into(),
                        in_flight: 0,
                    },
                    PathSample {
                        session: 2,
                        target: "ioc2".into(),
                        ops: i * 150,
                        state: "active".into(),
                        in_flight: 0,
                    },
                ],
            })
            .collect();
        Report {
            disk: "naa.<6001405>&co".into(),
            identity: "naa.6001405".into(),
            policy: "round-robin".into(),
            fault_kind: "admin".into(),
            fault: "path 1 administratively failed".into(),
            session: 1,
            settings: json!({}),
            phases: vec![],
            inject_us: 2_000_000,
            restore_us: 4_000_000,
            end_us: 5_000_000,
            done: (0..500)
                .map(|i| i * 10_000)
                .filter(|t| *t < 2_000_000 || *t > 2_300_000)
                .collect(),
            reads: 1,
            writes: 1,
            failures: vec![],
            fault_errors: vec![],
            samples,
            failed_polls: 0,
        }
    }

    /// Every opening tag closed in order (a small XML walk: no comments or CDATA here).
    fn balanced(svg: &str) -> Result<(), String> {
        let mut stack: Vec<String> = Vec::new();
        let mut rest = svg;
        while let Some(open) = rest.find('<') {
            let close = rest[open..].find('>').ok_or("unclosed <")? + open;
            let tag = &rest[open + 1..close];
            if let Some(name) = tag.strip_prefix('/') {
                match stack.pop() {
                    Some(top) if top == name => {}
                    other => return Err(format!("</{name}> closes {other:?}")),
                }
            } else if !tag.ends_with('/') {
                let name = tag.split_whitespace().next().ok_or("empty tag")?;
                stack.push(name.to_string());
            }
            rest = &rest[close + 1..];
        }
        if stack.is_empty() {
            Ok(())
        } else {
            Err(format!("unclosed {stack:?}"))
        }
    }

    #[test]
    fn the_picture_is_well_formed_and_has_every_series() {
        let svg = render(&report());
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.ends_with("</svg>\n"));
        balanced(&svg).expect("balanced tags");
        for id in [
            "path-1", "path-2", "total", "fault", "inject", "restore", "stall",
        ] {
            assert!(svg.contains(&format!("id=\"{id}\"")), "{id}");
        }
        assert!(svg.contains("max stall 320.0 ms"), "{svg}");
        assert!(svg.contains("path 1 (faulted)"));
        // The disk's name is escaped.
        assert!(svg.contains("naa.&lt;6001405&gt;&amp;co"));
        assert!(!svg.contains("<6001405>"));
        assert!(balanced("<svg><g></svg>").is_err());
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(step(18.0, 10.0), 2.0);
        assert_eq!(step(4300.0, 5.0), 1000.0);
        assert_eq!(step(1.0, 5.0), 0.2);
    }
}
