//! RESP2 replies off the read buffer: redis-protocol's zero-copy `decode_range` finds a whole
//! reply (or says it is incomplete), and [`to_value`] turns it into the redis-rs `Value` the
//! verbs parse. Integer replies (most of the load) allocate nothing.

use crate::resp::error::CallError;
use redis::Value;
use redis_protocol::resp2::decode::decode_range;
use redis_protocol::resp2::types::RangeFrame;

/// One decoded reply (an error reply as `Err`) and the number of bytes it took.
pub type Decoded = (Result<Value, CallError>, usize);

/// Decodes the first reply in `buf`: `Ok(None)` when it is not complete yet.
///
/// Errors: the outer `Err` is a protocol violation (not RESP2): the connection cannot go on.
#[inline]
pub fn decode(buf: &[u8]) -> Result<Option<Decoded>, String> {
    match integer(buf) {
        Some(int) => Ok(int),
        None => decode_frame(buf),
    }
}

/// [`decode`] of any reply but an integer, out of line: the driver's loop keeps only the
/// integer path inline, so the usual reply pays no call.
#[inline(never)]
fn decode_frame(buf: &[u8]) -> Result<Option<Decoded>, String> {
    match decode_range(buf) {
        Ok(Some((frame, used))) => Ok(Some((to_value(frame, &buf[..used]), used))),
        Ok(None) => Ok(None),
        Err(err) => Err(format!("malformed reply from the server: {err:?}")),
    }
}

/// An integer reply (`:<digits>\r\n`, most of the load) read straight off `buf`, with no
/// frame built: `Some(None)` when it is not complete yet. `None` for anything else (another
/// type, a sign, more than 18 digits, a malformed one), which the full decoder then reads or
/// rejects.
#[inline(always)]
fn integer(buf: &[u8]) -> Option<Option<Decoded>> {
    // One digit (`:1`, `:0`: EchoMQ's enqueue replies), read in one comparison, not through
    // the loop below, which costs several times that per reply.
    if let [b':', digit @ b'0'..=b'9', b'\r', b'\n', ..] = buf {
        return Some(Some((Ok(Value::Int(i64::from(digit - b'0'))), 4)));
    }
    let (&b':', rest) = buf.split_first()? else { return None };
    let mut value: i64 = 0;
    for (i, &b) in rest.iter().enumerate().take(19) {
        match b {
            b'0'..=b'9' if i < 18 => value = value * 10 + i64::from(b - b'0'),
            b'\r' if i > 0 => {
                return match rest.get(i + 1) {
                    Some(b'\n') => Some(Some((Ok(Value::Int(value)), i + 3))),
                    Some(_) => None,
                    None => Some(None),
                }
            }
            _ => return None,
        }
    }
    // Digits only so far: the rest has not arrived (18 digits and more go to the full decoder).
    (rest.len() < 18).then_some(None)
}

/// Converts one decoded frame whose ranges point into `buf`. A top-level error reply is
/// classified ([`CallError::from_error_reply`]); an error nested in an array, which no EchoMQ
/// script returns, is a [`CallError::Reply`].
pub fn to_value(frame: RangeFrame, buf: &[u8]) -> Result<Value, CallError> {
    match error_reply(&frame, buf) {
        Some(err) => Err(err),
        None => nested(frame, buf),
    }
}

/// A top-level error reply, classified ([`CallError::from_error_reply`]); `None` for any other
/// frame. For callers that decode replies themselves (the checker's key reader).
pub fn error_reply(frame: &RangeFrame, buf: &[u8]) -> Option<CallError> {
    let RangeFrame::Error((start, end)) = frame else { return None };
    let text = String::from_utf8_lossy(&buf[*start..*end]);
    let (code, detail) = text.split_once(' ').unwrap_or((&text, ""));
    Some(CallError::from_error_reply(code, detail))
}

fn nested(frame: RangeFrame, buf: &[u8]) -> Result<Value, CallError> {
    Ok(match frame {
        RangeFrame::Integer(n) => Value::Int(n),
        RangeFrame::BulkString((start, end)) => Value::BulkString(buf[start..end].to_vec()),
        RangeFrame::SimpleString((start, end)) => match &buf[start..end] {
            b"OK" => Value::Okay,
            text => Value::SimpleString(String::from_utf8_lossy(text).into_owned()),
        },
        RangeFrame::Null => Value::Nil,
        RangeFrame::Array(items) => {
            Value::Array(items.into_iter().map(|item| nested(item, buf)).collect::<Result<_, _>>()?)
        }
        RangeFrame::Error((start, end)) => {
            return Err(CallError::Reply(format!(
                "an error inside an array reply: {}",
                String::from_utf8_lossy(&buf[start..end])
            )))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lua::ErrorCode;

    #[test]
    fn whole_replies_decode_and_partial_ones_wait() {
        let (value, used) = decode(b":1\r\n:0\r\n").unwrap().unwrap();
        assert_eq!((value, used), (Ok(Value::Int(1)), 4));
        assert_eq!(decode(b"$5\r\nhel").unwrap(), None);
        let claim = b"*1\r\n*4\r\n$3\r\nJOB\r\n$2\r\nab\r\n:1\r\n:0\r\n";
        let (value, used) = decode(claim).unwrap().unwrap();
        assert_eq!(used, claim.len());
        let expected = Value::Array(vec![Value::Array(vec![
            Value::BulkString(b"JOB".to_vec()),
            Value::BulkString(b"ab".to_vec()),
            Value::Int(1),
            Value::Int(0),
        ])]);
        assert_eq!(value, Ok(expected));
        assert_eq!(decode(b"+OK\r\n").unwrap().unwrap().0, Ok(Value::Okay));
        assert_eq!(decode(b"$-1\r\n").unwrap().unwrap().0, Ok(Value::Nil));
        assert!(decode(b"?what\r\n").is_err());
    }

    #[test]
    fn integer_replies_read_directly_agree_with_the_full_decoder() {
        let cases: &[&[u8]] = &[
            b":0\r\n",
            b":1\r\n:0\r\n",
            b":123456789012345678\r\n",
            b":1234567890123456789\r\n",
            b":-5\r\n",
            b":\r\n",
            b":12x\r\n",
            b":12\rx",
            b":12",
            b":12\r",
            b":",
            b":9223372036854775807\r\n",
        ];
        for &case in cases {
            let full = match decode_range(case) {
                Ok(Some((frame, used))) => Ok(Some((to_value(frame, &case[..used]), used))),
                Ok(None) => Ok(None),
                Err(_) => Err(()),
            };
            assert_eq!(decode(case).map_err(|_| ()), full, "{}", String::from_utf8_lossy(case));
        }
        assert_eq!(integer(b":42\r\n"), Some(Some((Ok(Value::Int(42)), 5))));
        assert_eq!(integer(b":42"), Some(None));
        assert_eq!(integer(b"+OK\r\n"), None);
    }

    #[test]
    fn error_replies_are_classified_by_their_code() {
        let (value, _) = decode(b"-EMQFENCE token 1 is stale, current is 2\r\n").unwrap().unwrap();
        let err = value.unwrap_err();
        assert_eq!(err.code(), ErrorCode::Fence);
        assert_eq!(err, CallError::Emq { code: ErrorCode::Fence, message: "token 1 is stale, current is 2".into() });
        let (value, _) = decode(b"-NOSCRIPT No matching script.\r\n").unwrap().unwrap();
        assert!(matches!(value, Err(CallError::NoScript(_))));
        let (value, _) = decode(b"-ERR user_script:1: boom\r\n").unwrap().unwrap();
        assert_eq!(value.unwrap_err().code(), ErrorCode::Server);
    }
}
