//! A run's metrics endpoint, as the tests reach it: the address a spawned `emq-bench run
//! --metrics-addr 127.0.0.1:0` says it bound, and plain HTTP GETs on loopback.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Child;
use std::thread::JoinHandle;
use std::time::Duration;

/// A plain HTTP/1.0 GET on loopback: status and body.
pub fn http_get(addr: SocketAddr, path_and_query: &str) -> std::io::Result<(u16, String)> {
    let mut conn = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(conn, "GET {path_and_query} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut text = String::new();
    conn.read_to_string(&mut text)?;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    Ok((status, body.to_string()))
}

/// Reads `run`'s piped stderr up to the line that names the endpoint it serves (the first
/// thing a run with `--metrics-addr` says); returns that address, what stderr said up to it,
/// and a thread that collects the rest of stderr until the run ends.
pub fn serving(run: &mut Child) -> (SocketAddr, String, JoinHandle<String>) {
    let mut stderr = BufReader::new(run.stderr.take().expect("stderr piped"));
    let mut said = String::new();
    let endpoint: SocketAddr = loop {
        let mut line = String::new();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "emq-bench ended before serving: {said}");
        said.push_str(&line);
        if let Some(rest) = line.split("serving http://").nth(1) {
            break rest.trim().trim_end_matches("/metrics").parse().unwrap();
        }
    };
    let rest = std::thread::spawn(move || {
        let mut text = String::new();
        stderr.read_to_string(&mut text).unwrap();
        text
    });
    (endpoint, said, rest)
}
