//! Units as written in a scenario file: durations (`"250ms"`), sizes (`1024`, `"4KiB"`) and
//! counts (`4`).
//!
//! Durations and sizes keep the text the user wrote, so the raw [`Scenario`](super::Scenario)
//! serializes back (into `summary.json`) exactly as it was written, and both parse
//! while the TOML is being read, so a bad value is reported by the toml crate with
//! its line, column and caret. A count takes any number and leaves the range check to
//! validation, whose message states the field's bound.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// A duration with a unit, parsed by `humantime`: `"250ms"`, `"5s"`, `"1m 30s"`, `"0s"`.
///
/// TOML shape: a string. A bare number is refused because its unit would be a guess.
/// The text is kept verbatim for serialization; [`HumanDuration::get`] gives the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HumanDuration {
    text: String,
    value: Duration,
}

impl HumanDuration {
    /// Parses `text` with `humantime::parse_duration`.
    ///
    /// # Errors
    /// A message naming the text and the accepted shape when it has no valid unit.
    pub fn parse(text: &str) -> Result<Self, String> {
        humantime::parse_duration(text).map(|value| Self { text: text.to_owned(), value }).map_err(|e| {
            format!(
                "invalid duration {text:?} ({e}); expected a number with a unit such as \"250ms\", \"5s\" or \"1m\""
            )
        })
    }

    /// Wraps an already known duration; the text is humantime's rendering of it.
    pub fn from_duration(value: Duration) -> Self {
        Self { text: humantime::format_duration(value).to_string(), value }
    }

    /// The parsed duration.
    pub fn get(&self) -> Duration {
        self.value
    }

    /// The text as written in the file.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for HumanDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = HumanDuration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration string with a unit, such as \"250ms\", \"5s\" or \"1m\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                HumanDuration::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A byte count: a TOML integer (bytes) or a string with a unit parsed by `bytesize`
/// (`"512B"`, `"4KiB"`, `"1 MB"`; `KiB` = 1024, `KB` = 1000).
///
/// The original spelling is kept for serialization; [`HumanSize::bytes`] gives the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HumanSize {
    text: Option<String>,
    bytes: u64,
}

impl HumanSize {
    /// Parses a size string with `bytesize`.
    ///
    /// # Errors
    /// A message naming the text and the accepted shape.
    pub fn parse(text: &str) -> Result<Self, String> {
        bytesize::ByteSize::from_str(text.trim())
            .map(|b| Self {
                text: Some(text.to_owned()),
                bytes: b.0,
            })
            .map_err(|_| {
                format!("invalid size {text:?}; expected an integer byte count or a string such as \"512B\", \"4KiB\" or \"1 MB\"")
            })
    }

    /// A plain byte count, serialized as a TOML integer.
    pub fn from_bytes(bytes: u64) -> Self {
        Self { text: None, bytes }
    }

    /// The size in bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl fmt::Display for HumanSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.text {
            Some(t) => write!(f, "{t:?} ({} bytes)", self.bytes),
            None => write!(f, "{} bytes", self.bytes),
        }
    }
}

impl Serialize for HumanSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.text {
            Some(t) => s.serialize_str(t),
            None => s.serialize_u64(self.bytes),
        }
    }
}

impl<'de> Deserialize<'de> for HumanSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = HumanSize;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size: an integer byte count or a string such as \"4KiB\"")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(HumanSize::from_bytes(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                u64::try_from(v)
                    .map(HumanSize::from_bytes)
                    .map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                HumanSize::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A count as written (`count = 4`, `jobs = 100000`): tasks, connections, requests, jobs, ...
///
/// TOML shape: an integer. Any TOML number is read, so that validation, not the TOML reader,
/// refuses a negative, too large or fractional value (`count = 4294967296`, `pipeline = 2e7`)
/// with the field's bound in the message, instead of "expected u32". Serializes as an integer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Count {
    /// A TOML integer (any i64).
    Int(i64),
    /// A TOML float such as `1e8`: always refused by validation (a count is an integer).
    Float(f64),
}

impl Count {
    /// The value when it is an integer within `range`.
    pub fn within(self, range: std::ops::RangeInclusive<u64>) -> Option<u64> {
        match self {
            Count::Int(n) => u64::try_from(n).ok().filter(|n| range.contains(n)),
            Count::Float(_) => None,
        }
    }
}

impl From<u32> for Count {
    fn from(n: u32) -> Self {
        Count::Int(i64::from(n))
    }
}

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Count::Int(n) => write!(f, "{n}"),
            // `{:?}` keeps the ".0" that says it was read as a float.
            Count::Float(v) => write!(f, "{v:?}"),
        }
    }
}

impl Serialize for Count {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Count::Int(n) => s.serialize_i64(n),
            Count::Float(v) => s.serialize_f64(v),
        }
    }
}

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Count;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer count")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Count::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                // Only above i64::MAX, which TOML integers never are; saturate for the message.
                Ok(Count::Int(i64::try_from(v).unwrap_or(i64::MAX)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Ok(Count::Float(v))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(HumanDuration::parse("250ms").unwrap().get(), Duration::from_millis(250));
        assert_eq!(HumanDuration::parse("1m").unwrap().get(), Duration::from_secs(60));
        assert_eq!(HumanDuration::parse("0s").unwrap().get(), Duration::ZERO);
        assert!(HumanDuration::parse("5").is_err());
        assert!(HumanDuration::parse("fast").is_err());
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(HumanSize::parse("4KiB").unwrap().bytes(), 4096);
        assert_eq!(HumanSize::parse("1 MB").unwrap().bytes(), 1_000_000);
        assert_eq!(HumanSize::parse("512B").unwrap().bytes(), 512);
        assert!(HumanSize::parse("4 potatoes").is_err());
    }
}
