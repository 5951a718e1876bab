//! The harness's payload in a BullMQ job's `data` field (issue 12, docs/bullmq-mapping.md
//! section 8): a JSON string literal holding the standard, padded base64 (RFC 4648 section 4)
//! of the payload bytes, e.g. `"AAABk2…"`, quotes included. The official client `json.loads`
//! `data` before a processor sees it (`job.py` `fromJSON`), so the field must be JSON; base64
//! needs no JSON escape, so the literal is the base64 between two quotes.
//!
//! The load side writes it with [`encode_data`] (addStandardJob's `ARGV[2]`); the checker and the
//! consumer read it back with [`decode_data`] before [`verify`](crate::load::payload::verify).

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

/// Appends `payload` as a `data` field to `out`: `"` + standard padded base64 + `"`, i.e.
/// `4 × ceil(len / 3) + 2` bytes. Never fails; `out` is only grown.
pub fn encode_data(payload: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    let len = base64::encoded_len(payload.len(), true).expect("a payload's base64 length fits in usize");
    out.resize(start + len + 2, b'"');
    let written = STANDARD
        .encode_slice(payload, &mut out[start + 1..start + 1 + len])
        .expect("the buffer was sized by encoded_len");
    debug_assert_eq!(written, len);
}

/// The payload bytes of a `data` field as [`encode_data`] writes it, or `None` when the field is
/// not a JSON string literal of standard padded base64. A literal with JSON escapes (`\/` for
/// `/`, `\u0041`, which other JSON writers may emit) is unescaped first, so any JSON encoding of
/// the same string reads back; whitespace inside the base64 is refused.
pub fn decode_data(field: &[u8]) -> Option<Vec<u8>> {
    let inner = field.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    if !inner.contains(&b'\\') {
        if inner.contains(&b'"') {
            return None;
        }
        return STANDARD.decode(inner).ok();
    }
    let text: String = serde_json::from_slice(field).ok()?;
    STANDARD.decode(text.as_bytes()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_round_trips_as_a_json_string_of_padded_base64() {
        for payload in [&b""[..], b"a", b"ab", b"abc", &[0, 1, 2, 250, 251, 252, 253, 254, 255]] {
            let mut out = b"prefix".to_vec();
            encode_data(payload, &mut out);
            let field = &out[6..];
            assert_eq!(field.len(), 4 * payload.len().div_ceil(3) + 2);
            let text: String = serde_json::from_slice(field).unwrap();
            assert_eq!(STANDARD.decode(text).unwrap(), payload);
            assert_eq!(decode_data(field).as_deref(), Some(payload));
        }
        assert_eq!(decode_data(br#""YWJj""#).unwrap(), b"abc");
        assert_eq!(decode_data(br#""\/w==""#).unwrap(), [0xff]);
        assert_eq!(decode_data(br#""\u0059WJj""#).unwrap(), b"abc");
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            &b"YWJj"[..],
            b"\"YWJj",
            b"\"YWI\"",
            b"\"YW Jj\"",
            b"\"YW\"Jj\"",
            b"\"YWJj\\\"",
            b"\"YWJj\"\"",
            b"\"YW-j\"",
            b"{\"a\":1}",
            b"\"",
        ] {
            assert_eq!(decode_data(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }
}
