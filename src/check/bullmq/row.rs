//! One BullMQ job hash (`HGETALL bull:{q}:<id>`) reduced to a [`Row`] with its [`BullRow`]: the
//! payload is decoded from `data` and verified at once, then dropped (docs/bullmq-mapping.md
//! section 2 lists the fields).

use crate::bullmq::data::decode_data;
use crate::check::scan::{parse_attempts, reduce_reply, Reduced};
use crate::check::state::{BullRow, Row, BULL_BORN_FIELDS, BULL_LATER_FIELDS};
use crate::keyspace::JobId;
use redis::Value;

/// The `defa` text moveStalledJobsToWait writes for a job stalled past `maxStalledCount`; the
/// worker fails the job with it as `failedReason` (docs/bullmq-mapping.md section 5).
pub const STALLED_TOO_OFTEN: &[u8] = crate::bullmq::STALLED_TOO_OFTEN.as_bytes();

/// Reduces one `HGETALL` reply of job `id` (RESP2 or RESP3) to a BullMQ [`Row`]. `has_lock` is
/// left false: the lock is another key, which the reader sets it from.
pub fn reduce_bull_row(id: &JobId, reply: &Value) -> Reduced {
    reduce_reply(reply, |pairs| reduce_bull_pairs(id, pairs))
}

fn reduce_bull_pairs<'a>(id: &JobId, pairs: &mut dyn Iterator<Item = Option<(&'a [u8], &'a [u8])>>) -> Reduced {
    let mut row = Row::empty();
    let mut bull = BullRow::default();
    for pair in pairs {
        let Some((name, value)) = pair else { return Reduced::NotAHash };
        if let Some(i) = BULL_BORN_FIELDS.iter().position(|born| born.as_bytes() == name) {
            bull.born |= 1 << i;
        }
        match name {
            b"data" => match decode_data(value) {
                Some(payload) => row.take_payload(id, &payload),
                None => {
                    row.payload_len = Some(value.len());
                    bull.data_undecodable = true;
                }
            },
            b"ats" => bull.ats = Some(parse_attempts(value)),
            b"atm" => bull.atm = Some(parse_attempts(value)),
            b"stc" => bull.stc = Some(parse_attempts(value)),
            b"finishedOn" => bull.finished_on = Some(parse_attempts(value)),
            b"returnvalue" => bull.has_returnvalue = true,
            b"defa" => bull.deferred_failure = true,
            b"failedReason" => {
                row.has_last_error = true;
                row.stalled = value.windows(STALLED_TOO_OFTEN.len()).any(|w| w == STALLED_TOO_OFTEN);
            }
            b"progress" => row.has_progress = true,
            other => {
                let known = BULL_BORN_FIELDS.iter().chain(&BULL_LATER_FIELDS).any(|f| f.as_bytes() == other);
                if !known {
                    row.foreign_fields.push(String::from_utf8_lossy(other).into_owned());
                }
            }
        }
    }
    row.foreign_fields.sort_unstable();
    row.bull = Some(Box::new(bull));
    Reduced::Row(row)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bullmq::data::encode_data;
    use crate::check::state::StateField;
    use crate::keyspace::JobIdGen;
    use crate::payload::{header_crc, PayloadCheck, PayloadPool};

    fn reply(pairs: &[(&str, &[u8])]) -> Value {
        let bulk = |s: &[u8]| Value::BulkString(s.to_vec());
        Value::Array(pairs.iter().flat_map(|(name, value)| [bulk(name.as_bytes()), bulk(value)]).collect())
    }

    #[test]
    fn a_finished_job_hash_is_reduced_without_its_payload() {
        let mut ids = JobIdGen::new(4);
        let (id, other) = (ids.next_id(), ids.next_id());
        let mut payload = Vec::new();
        PayloadPool::new(4).build(&id, 50, &mut payload);
        let mut data = Vec::new();
        encode_data(&payload, &mut data);
        let hash = reply(&[
            ("name", b"emq"),
            ("data", &data),
            ("opts", b"{}"),
            ("timestamp", b"17"),
            ("delay", b"0"),
            ("priority", b"0"),
            ("ats", b"2"),
            ("atm", b"01"),
            ("failedReason", b"\"job stalled more than allowable limit\""),
            ("finishedOn", b"18"),
            ("zeta", b""),
        ]);
        let Reduced::Row(row) = reduce_bull_row(&id, &hash) else { panic!("not a row") };
        assert_eq!((row.state.clone(), row.attempts.clone()), (StateField::Missing, None));
        assert_eq!((row.payload_len, row.payload_check), (Some(50), Some(PayloadCheck::Intact)));
        assert_eq!(row.payload_crc, header_crc(&payload));
        assert!(row.has_last_error && row.stalled && !row.has_progress);
        assert_eq!(row.foreign_fields, vec!["zeta".to_string()]);
        let bull = row.bull.unwrap();
        assert_eq!((bull.ats, bull.atm), (Some(Ok(2)), Some(Err("01".into()))));
        assert_eq!((bull.finished_on, bull.stc, bull.born), (Some(Ok(18)), None, 0b11_1111));
        assert!(!bull.has_returnvalue && !bull.data_undecodable && !bull.has_lock);

        let Reduced::Row(row) = reduce_bull_row(&other, &hash) else { panic!("not a row") };
        assert_eq!(row.payload_check, Some(PayloadCheck::WrongId));
        let Reduced::Row(row) = reduce_bull_row(&id, &reply(&[("data", b"{\"a\":1}")])) else { panic!() };
        assert_eq!((row.payload_len, row.payload_check), (Some(7), None));
        assert_eq!(row.bull.as_ref().map(|b| (b.data_undecodable, b.born)), Some((true, 0b10)));
        assert_eq!(reduce_bull_row(&id, &Value::Array(vec![])), Reduced::Absent);
        assert_eq!(reduce_bull_row(&id, &Value::Int(1)), Reduced::NotAHash);
    }
}
