//! One command as RESP bytes, built in place and reused.
//!
//! redis-rs' `Cmd` stores each argument, then packs the whole command into a second buffer on
//! send: two copies, a length table and a digit formatting per argument, on every enqueue.
//! A [`Request`] frames each argument as it is added
//! (`$<len>\r\n<bytes>\r\n`), starts from a pre-framed template (`EVALSHA <sha>`, framed once
//! per script by the registry), and is written out with only the `*<count>\r\n` header in
//! front. Arguments still go through redis-rs' `ToRedisArgs`, so numbers and strings are
//! formatted exactly as redis-rs formats them; the tests hold the bytes equal to `Cmd`'s.

use redis::{Cmd, RedisWrite, ToRedisArgs};
use std::io::Write;

/// The header room [`Request::onto`] leaves: `*<count>\r\n` for up to 9 arguments.
const HEADER_ROOM: &[u8] = b"*0\r\n";

/// A command under construction: its arguments already framed as RESP bulk strings.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// `framed[base..]` holds the arguments; what is before `base` belongs to the output
    /// buffer the request is being built onto ([`Request::onto`]).
    framed: Vec<u8>,
    base: usize,
    count: usize,
    /// Buffer of [`RedisWrite::writer_for_next_arg`]: an argument of unknown length is written
    /// here, then framed.
    pending: Vec<u8>,
}

impl Request {
    /// An empty request.
    pub fn new() -> Request {
        Request::default()
    }

    /// A request of `args` (the command name first).
    pub fn from_args<T: ToRedisArgs>(args: &[T]) -> Request {
        let mut request = Request::new();
        for arg in args {
            request.arg(arg);
        }
        request
    }

    /// Forgets every argument, keeping the buffers.
    pub fn clear(&mut self) {
        self.framed.truncate(self.base);
        self.count = 0;
    }

    /// A request built straight onto the end of `out`, a connection's output buffer, behind
    /// room for its `*<count>` header: [`Request::into_packed`] writes the header in place and
    /// hands `out` back, so the request's bytes are never copied.
    pub fn onto(mut out: Vec<u8>) -> Request {
        out.extend_from_slice(HEADER_ROOM);
        Request { base: out.len(), framed: out, count: 0, pending: Vec::new() }
    }

    /// The output buffer of [`Request::onto`], with this request packed at its end. A request
    /// of 10 arguments or more needs a longer header than the room left, and is shifted.
    #[inline]
    pub fn into_packed(self) -> Vec<u8> {
        let Request { mut framed, base, count, .. } = self;
        let head = base - HEADER_ROOM.len();
        match u8::try_from(count) {
            Ok(digit @ 0..=9) => framed[head + 1] = b'0' + digit,
            _ => splice_header(&mut framed, head..base, count),
        }
        framed
    }

    /// Appends `arg` (one or more arguments, as redis-rs formats them).
    pub fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Request {
        arg.write_redis_args(self);
        self
    }

    /// Appends one argument made of `parts` back to back, framed straight into the request.
    pub fn arg_concat(&mut self, parts: &[&[u8]]) -> &mut Request {
        let len = parts.iter().map(|p| p.len()).sum();
        self.arg_with(len, |out| parts.iter().for_each(|p| out.extend_from_slice(p)))
    }

    /// Appends one argument of exactly `len` bytes that `fill` appends to the buffer it is
    /// given: a large argument (a payload) is built in place instead of copied in.
    ///
    /// Panics when `fill` appends another number of bytes (the frame's length would lie).
    pub fn arg_with(&mut self, len: usize, fill: impl FnOnce(&mut Vec<u8>)) -> &mut Request {
        pack_arg_with(&mut self.framed, len, fill);
        self.count += 1;
        self
    }

    /// Appends `count` arguments that are already framed (a template, see [`Request::framed`]).
    pub fn push_framed(&mut self, framed: &[u8], count: usize) {
        self.framed.extend_from_slice(framed);
        self.count += count;
    }

    /// The framed arguments (no `*<count>` header) and how many there are.
    pub fn framed(&self) -> (&[u8], usize) {
        (&self.framed[self.base..], self.count)
    }

    /// Appends the whole command, `*<count>\r\n` and the arguments, to `out`.
    pub fn write_packed(&self, out: &mut Vec<u8>) {
        write_header(self.count, out);
        out.extend_from_slice(&self.framed[self.base..]);
    }

    /// The arguments, unframed, in order.
    pub fn args(&self) -> impl Iterator<Item = &[u8]> {
        let mut rest = &self.framed[self.base..];
        std::iter::from_fn(move || {
            // Only this type writes `framed`: `$<len>\r\n<len bytes>\r\n`, repeated.
            let header_end = rest.iter().position(|&b| b == b'\r')?;
            let len: usize = std::str::from_utf8(&rest[1..header_end]).ok()?.parse().ok()?;
            let arg = &rest[header_end + 2..header_end + 2 + len];
            rest = &rest[header_end + 2 + len + 2..];
            Some(arg)
        })
    }

    /// The same command as a redis-rs `Cmd` (for the redis-rs transport).
    pub fn to_cmd(&self) -> Cmd {
        let mut cmd = Cmd::new();
        for arg in self.args() {
            cmd.arg(arg);
        }
        cmd
    }
}

/// Appends one bulk-string argument of exactly `len` bytes that `fill` appends to `out`:
/// `$<len>\r\n`, the bytes, `\r\n` (a payload built in place instead of copied in).
///
/// Panics when `fill` appends another number of bytes (the frame's length would lie).
#[inline]
pub fn pack_arg_with(out: &mut Vec<u8>, len: usize, fill: impl FnOnce(&mut Vec<u8>)) {
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(len).as_bytes();
    out.reserve(digits.len() + len + 5);
    out.push(b'$');
    out.extend_from_slice(digits);
    out.extend_from_slice(b"\r\n");
    let at = out.len();
    fill(out);
    assert_eq!(out.len() - at, len, "an argument framed as {len} bytes");
    out.extend_from_slice(b"\r\n");
}

/// Appends `n` as one bulk-string argument, as redis-rs frames an integer.
pub fn pack_int(out: &mut Vec<u8>, n: u64) {
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(n).as_bytes();
    pack_arg_with(out, digits.len(), |out| out.extend_from_slice(digits));
}

impl Request {
    /// The request `packed` holds: exactly one `*<n>\r\n` and its `n` bulk strings, as
    /// [`write_packed`](Self::write_packed) writes them. `None` for anything else (a partial
    /// request, two of them, another RESP type).
    pub fn from_packed(packed: &[u8]) -> Option<Request> {
        /// The number between `prefix` and the first CRLF of `bytes`, and what follows it.
        fn header(bytes: &[u8], prefix: u8) -> Option<(usize, &[u8])> {
            let end = bytes.iter().position(|&b| b == b'\r')?;
            let digits = bytes.get(1..end).filter(|_| bytes[0] == prefix)?;
            let n = std::str::from_utf8(digits).ok()?.parse().ok()?;
            Some((n, bytes.get(end..)?.strip_prefix(b"\r\n")?))
        }
        let (count, args) = header(packed, b'*')?;
        let mut rest = args;
        for _ in 0..count {
            let (len, after) = header(rest, b'$')?;
            rest = after.get(len..)?.strip_prefix(b"\r\n")?;
        }
        (count > 0 && rest.is_empty()).then(|| Request { framed: args.to_vec(), base: 0, count, pending: Vec::new() })
    }
}

/// Replaces the header room `room` of `framed` with the `*<count>\r\n` header of a request
/// of 10 arguments or more (the rest of the request shifts).
#[cold]
fn splice_header(framed: &mut Vec<u8>, room: std::ops::Range<usize>, count: usize) {
    let mut header = Vec::new();
    write_header(count, &mut header);
    framed.splice(room, header);
}

/// Appends a command's `*<count>\r\n` header to `out`.
fn write_header(count: usize, out: &mut Vec<u8>) {
    out.push(b'*');
    out.extend_from_slice(itoa::Buffer::new().format(count).as_bytes());
    out.extend_from_slice(b"\r\n");
}

impl RedisWrite for Request {
    fn write_arg(&mut self, arg: &[u8]) {
        pack_arg_with(&mut self.framed, arg.len(), |out| out.extend_from_slice(arg));
        self.count += 1;
    }

    fn writer_for_next_arg(&mut self) -> impl Write + '_ {
        self.pending.clear();
        PendingArg { request: self }
    }
}

/// Collects one argument of unknown length; frames it when dropped.
struct PendingArg<'a> {
    request: &'a mut Request,
}

impl Write for PendingArg<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.request.pending.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for PendingArg<'_> {
    fn drop(&mut self) {
        let pending = std::mem::take(&mut self.request.pending);
        self.request.write_arg(&pending);
        self.request.pending = pending;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::{JobIdGen, QueueKeys, QueueName};

    #[test]
    fn packed_requests_parse_back_and_anything_else_does_not() {
        let mut request = Request::new();
        request.arg("EVALSHA").arg("abc").arg(2usize).arg(&b""[..]).arg(&b"x\r\ny"[..]);
        let mut packed = Vec::new();
        request.write_packed(&mut packed);
        let back = Request::from_packed(&packed).expect("one whole request");
        assert_eq!(back.framed(), request.framed());
        let mut by_hand = Vec::new();
        by_hand.extend_from_slice(b"*2\r\n");
        pack_arg_with(&mut by_hand, 3, |out| out.extend_from_slice(b"SET"));
        pack_int(&mut by_hand, 18_446_744_073_709_551_615);
        assert_eq!(by_hand, Request::new().arg("SET").arg(u64::MAX).to_cmd().get_packed_command());
        let mut two = packed.clone();
        two.extend_from_slice(&packed);
        for bad in [&packed[..packed.len() - 1], &two[..], b"", b"*0\r\n", b"+OK\r\n", b"*1\r\n$3\r\nab\r\n", b"*x\r\n"]
        {
            assert!(Request::from_packed(bad).is_none(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn requests_pack_to_the_same_bytes_as_redis_rs() {
        let keys = QueueKeys::new(QueueName::new("bench-0").unwrap());
        let id = JobIdGen::new(1).next_id();
        let mut request = Request::new();
        let mut cmd = Cmd::new();
        request.arg("EVALSHA").arg("0123456789abcdef").arg(2usize);
        cmd.arg("EVALSHA").arg("0123456789abcdef").arg(2usize);
        request.arg_concat(&keys.job_key_parts(&id)).arg(&keys.pending).arg(id.as_bytes());
        request.arg_with(0, |_| {}).arg(-7i64);
        cmd.arg(keys.job_key(&id)).arg(&keys.pending).arg(id.as_bytes()).arg(&b""[..]).arg(-7i64);
        request.arg(u64::MAX).arg(vec![0u8, 13, 10, 255]).arg(1.5f64).arg(&["a", "bc"][..]);
        cmd.arg(u64::MAX).arg(vec![0u8, 13, 10, 255]).arg(1.5f64).arg(&["a", "bc"][..]);
        let mut packed = Vec::new();
        request.write_packed(&mut packed);
        assert_eq!(packed, cmd.get_packed_command());
        assert_eq!(request.to_cmd().get_packed_command(), cmd.get_packed_command());
        let args: Vec<&[u8]> = request.args().collect();
        assert_eq!(args.len(), 13);
        assert_eq!(args[3], keys.job_key(&id).as_bytes());
    }

    #[test]
    fn a_request_built_onto_a_buffer_packs_as_a_standalone_one() {
        for args in [1usize, 9, 10, 12] {
            let mut alone = Request::new();
            let mut onto = Request::onto(b"*1\r\n$4\r\nPING\r\n".to_vec());
            for i in 0..args {
                alone.arg(i);
                onto.arg(i);
            }
            assert_eq!(onto.framed(), alone.framed());
            let mut expected = b"*1\r\n$4\r\nPING\r\n".to_vec();
            alone.write_packed(&mut expected);
            assert_eq!(onto.into_packed(), expected, "{args} arguments");
        }
    }

    #[test]
    fn templates_and_clear_reuse_the_buffers() {
        let mut template = Request::new();
        template.arg("EVALSHA").arg("sha");
        let (framed, count) = template.framed();
        let mut request = Request::new();
        for round in 0..3u32 {
            request.clear();
            request.push_framed(framed, count);
            request.arg(round);
            let mut packed = Vec::new();
            request.write_packed(&mut packed);
            assert_eq!(packed, redis::cmd("EVALSHA").arg("sha").arg(round).get_packed_command());
        }
    }
}
