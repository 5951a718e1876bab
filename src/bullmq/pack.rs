//! Arguments written in place: the MessagePack ARGV that BullMQ's scripts `cmsgpack.unpack`
//! (docs/bullmq-mapping.md 3.1-3.4) and the JSON strings its clients send, each framed straight
//! into the request with no buffer of its own.
//!
//! A framed argument needs its length first ([`Request::arg_with`]), and a MessagePack value's
//! length depends on its markers; so the writer runs twice, once into a byte counter and once
//! into the frame. Both runs are rmp's (or serde_json's) own encoders: the markers are the
//! library's, never ours, and the shapes are a dozen small values.

use crate::resp::request::Request;
use std::io;

/// Counts what is written to it.
struct Count(usize);

impl io::Write for Count {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Appends one argument made of what `write` writes (run twice: it must write the same bytes
/// each time). rmp's `encode::write_*` and `serde_json::to_writer` take the `&mut dyn Write`
/// as their writer.
///
/// Panics only if `write` fails, which writing to memory does not.
pub(crate) fn arg_written(cmd: &mut Request, write: impl Fn(&mut dyn io::Write) -> io::Result<()>) {
    let mut count = Count(0);
    write(&mut count).expect("counting bytes cannot fail");
    cmd.arg_with(count.0, |out| write(out).expect("writing to memory cannot fail"));
}

/// Writes a MessagePack str (what BullMQ's clients pack for every string: `use_bin_type=True`
/// keeps text as str, and cmsgpack reads str and bin alike).
pub(crate) fn str(w: &mut dyn io::Write, s: &str) -> io::Result<()> {
    rmp::encode::write_str(&mut &mut *w, s).map_err(io::Error::from)
}

/// Writes a MessagePack str of raw bytes (ids and tokens: ASCII, so valid UTF-8 strings).
pub(crate) fn str_bytes(w: &mut dyn io::Write, s: &[u8]) -> io::Result<()> {
    let mut w = &mut *w;
    rmp::encode::write_str_len(&mut w, s.len() as u32).map_err(io::Error::from)?;
    w.write_all(s)
}

/// Writes the smallest MessagePack unsigned integer for `n` (as msgpack-python and msgpackr do).
pub(crate) fn uint(w: &mut dyn io::Write, n: u64) -> io::Result<()> {
    rmp::encode::write_uint(&mut &mut *w, n).map(drop).map_err(io::Error::from)
}

/// Writes the smallest MessagePack signed integer for `n` (`keepJobs.count` is -1).
pub(crate) fn sint(w: &mut dyn io::Write, n: i64) -> io::Result<()> {
    rmp::encode::write_sint(&mut &mut *w, n).map(drop).map_err(io::Error::from)
}

/// Writes MessagePack nil (an absent entry: cmsgpack leaves the Lua table slot empty).
pub(crate) fn nil(w: &mut dyn io::Write) -> io::Result<()> {
    rmp::encode::write_nil(&mut &mut *w)
}

/// Writes a MessagePack bool.
pub(crate) fn bool(w: &mut dyn io::Write, b: bool) -> io::Result<()> {
    rmp::encode::write_bool(&mut &mut *w, b)
}

/// Writes a MessagePack map header of `n` pairs.
pub(crate) fn map(w: &mut dyn io::Write, n: u32) -> io::Result<()> {
    rmp::encode::write_map_len(&mut &mut *w, n).map(drop).map_err(io::Error::from)
}

/// Writes a MessagePack array header of `n` values.
pub(crate) fn array(w: &mut dyn io::Write, n: u32) -> io::Result<()> {
    rmp::encode::write_array_len(&mut &mut *w, n).map(drop).map_err(io::Error::from)
}

/// Writes `s` as a JSON string literal (quoted, escaped by serde_json): what BullMQ's clients
/// send for a text return value or failed reason (`json.dumps`).
pub(crate) fn json_str(w: &mut dyn io::Write, s: &str) -> io::Result<()> {
    serde_json::to_writer(w, s).map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_argument_is_framed_with_its_length() {
        let mut cmd = Request::new();
        arg_written(&mut cmd, |w| {
            map(w, 2)?;
            str(w, "token")?;
            str_bytes(w, b"00000000000000a1")?;
            str(w, "keepJobs")?;
            map(w, 1)?;
            str(w, "count")?;
            sint(w, -1)
        });
        arg_written(&mut cmd, |w| json_str(w, "a \"quoted\" reason"));
        let args: Vec<&[u8]> = cmd.args().collect();
        // The same bytes as msgpack-python's packb({"token": ..., "keepJobs": {"count": -1}}).
        let mut want = vec![0x82, 0xa5];
        want.extend_from_slice(b"token");
        want.push(0xb0);
        want.extend_from_slice(b"00000000000000a1");
        want.push(0xa8);
        want.extend_from_slice(b"keepJobs");
        want.extend_from_slice(&[0x81, 0xa5]);
        want.extend_from_slice(b"count");
        want.push(0xff);
        assert_eq!(args[0], &want[..]);
        assert_eq!(args[1], br#""a \"quoted\" reason""#);
    }

    #[test]
    fn integers_take_the_smallest_marker() {
        let mut cmd = Request::new();
        arg_written(&mut cmd, |w| {
            uint(w, 5)?;
            uint(w, 200)?;
            uint(w, 1_764_620_000_000)?;
            nil(w)?;
            bool(w, true)
        });
        let args: Vec<&[u8]> = cmd.args().collect();
        let mut want = vec![0x05, 0xcc, 200, 0xcf];
        want.extend_from_slice(&1_764_620_000_000u64.to_be_bytes());
        want.extend_from_slice(&[0xc0, 0xc3]);
        assert_eq!(args[0], &want[..]);
    }
}
