//! `--metrics ADDR` of `target run` and `host run`: the daemon's metrics served for
//! Prometheus on a plain TCP listener (`GET /metrics`, text format 0.0.4). Opt-in; one
//! thread; each request is read with a bound (8 KiB, 5 s), answered and closed, so a slow
//! or hostile client holds one thread for at most that long. Anything but `GET /metrics`
//! is 404 (405 for another method); a daemon that cannot answer is 503 with the reason.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The served listener; stops (and joins its thread) when dropped.
pub(crate) struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MetricsServer {
    /// Listens on `addr` and answers with `render()`.
    pub(crate) fn start(
        addr: SocketAddr,
        render: impl Fn() -> Result<String, String> + Send + 'static,
    ) -> std::io::Result<MetricsServer> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if s.load(Ordering::Acquire) {
                        return;
                    }
                    match conn {
                        Ok(c) => {
                            if let Err(e) = answer(c, &render) {
                                tracing::debug!(error = %e, "metrics request");
                            }
                        }
                        Err(e) => tracing::warn!(error = %e, "metrics listener: accept failed"),
                    }
                }
            })?;
        Ok(MetricsServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the acceptor; it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn answer(mut c: TcpStream, render: &impl Fn() -> Result<String, String>) -> std::io::Result<()> {
    c.set_read_timeout(Some(Duration::from_secs(5)))?;
    c.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = c.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > 8192 {
            return respond(&mut c, "431 Request Header Fields Too Large", "too large\n");
        }
    }
    let line = String::from_utf8_lossy(&head);
    let mut words = line.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET", "/metrics") => match render() {
            Ok(body) => respond(&mut c, "200 OK", &body),
            Err(why) => respond(&mut c, "503 Service Unavailable", &format!("{why}\n")),
        },
        ("GET", _) => respond(&mut c, "404 Not Found", "only /metrics is served\n"),
        _ => respond(&mut c, "405 Method Not Allowed", "GET /metrics only\n"),
    }
}

fn respond(c: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes())?;
    c.write_all(body.as_bytes())
}

/// `GET /metrics` from `addr`: the status line and the body.
#[cfg(test)]
fn scrape(addr: SocketAddr) -> std::io::Result<(String, String)> {
    let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    c.set_read_timeout(Some(Duration::from_secs(10)))?;
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: srpctl\r\nConnection: close\r\n\r\n")?;
    let mut all = String::new();
    c.read_to_string(&mut all)?;
    let (head, body) = all.split_once("\r\n\r\n").unwrap_or((&all, ""));
    Ok((
        head.lines().next().unwrap_or_default().to_owned(),
        body.to_owned(),
    ))
}

/// Prints an exposition: as it is, or (`as_json`) as a JSON array of samples
/// `{"name":…,"labels":{…},"value":…}`.
pub(crate) fn print(text: &str, as_json: bool) -> anyhow::Result<()> {
    if !as_json {
        print!("{text}");
        return Ok(());
    }
    let samples: Vec<serde_json::Value> = text.lines().filter_map(sample_json).collect();
    println!("{}", serde_json::to_string_pretty(&samples)?);
    Ok(())
}

/// One sample line as JSON (comments and malformed lines: none).
fn sample_json(line: &str) -> Option<serde_json::Value> {
    if line.starts_with('#') || line.trim().is_empty() {
        return None;
    }
    let (series, value) = line.rsplit_once(' ')?;
    let value: f64 = value.parse().ok()?;
    let (name, labels) = match series.split_once('{') {
        Some((name, rest)) => (name, rest.strip_suffix('}')?),
        None => (series, ""),
    };
    let mut map = serde_json::Map::new();
    let mut rest = labels;
    while let Some((key, after)) = rest.split_once("=\"") {
        let mut v = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, ch)) = chars.next() {
            match ch {
                '\\' => match chars.next() {
                    Some((_, 'n')) => v.push('\n'),
                    Some((_, c)) => v.push(c),
                    None => {}
                },
                '"' => {
                    end = i + 1;
                    break;
                }
                c => v.push(c),
            }
        }
        map.insert(
            key.trim_start_matches(',').to_owned(),
            serde_json::Value::String(v),
        );
        rest = &after[end..];
    }
    Some(serde_json::json!({"name": name, "labels": map, "value": value}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_metrics_and_refuses_the_rest() {
        let s = MetricsServer::start("127.0.0.1:0".parse().expect("addr"), || {
            Ok("# TYPE x counter\nx_total 1\n".to_owned())
        })
        .expect("listen");
        let (status, body) = scrape(s.addr()).expect("scrape");
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert_eq!(body, "# TYPE x counter\nx_total 1\n");
        let mut c = TcpStream::connect(s.addr()).expect("connect");
        c.write_all(b"POST /metrics HTTP/1.1\r\n\r\n")
            .expect("send");
        let mut r = String::new();
        c.read_to_string(&mut r).expect("read");
        assert!(r.starts_with("HTTP/1.1 405"), "{r}");
        let mut c = TcpStream::connect(s.addr()).expect("connect");
        c.write_all(b"GET / HTTP/1.1\r\n\r\n").expect("send");
        let mut r = String::new();
        c.read_to_string(&mut r).expect("read");
        assert!(r.starts_with("HTTP/1.1 404"), "{r}");
        let down = MetricsServer::start("127.0.0.1:0".parse().expect("addr"), || {
            Err("the daemon did not answer within 5s".into())
        })
        .expect("listen");
        let (status, body) = scrape(down.addr()).expect("scrape");
        assert_eq!(status, "HTTP/1.1 503 Service Unavailable");
        assert!(body.contains("did not answer"));
    }

    #[test]
    fn samples_become_json_with_their_labels() {
        let v = sample_json(r#"lat_bucket{lun="v\"1",le="0.5"} 3"#).expect("sample");
        assert_eq!(
            v,
            serde_json::json!({"name": "lat_bucket", "labels": {"lun": "v\"1", "le": "0.5"}, "value": 3.0})
        );
        let v = sample_json("up 1").expect("sample");
        assert_eq!(
            v,
            serde_json::json!({"name": "up", "labels": {}, "value": 1.0})
        );
        assert!(sample_json("# HELP up Up.").is_none());
    }
}
