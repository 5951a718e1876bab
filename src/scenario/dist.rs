//! Raw distribution shapes, shared by sizes (`producers.payload`) and durations
//! (`producers.delay`, `consumers.work`).
//!
//! Each distribution is a single-key TOML table naming its shape, or a bare value
//! meaning `fixed`:
//!
//! ```toml
//! payload = "1KiB"                                   # same as { fixed = "1KiB" }
//! payload = { fixed = 256 }                          # integer = bytes
//! payload = { uniform = ["64B", "4KiB"] }            # [LO, HI], inclusive, LO <= HI
//! payload = { lognormal = { median = "1KiB", p99 = "16KiB" } }
//! payload = { weighted = [["128B", 9], ["64KiB", 1]] }  # [[VALUE, WEIGHT], ...], weights > 0
//! work    = { lognormal = { median = "2ms", p99 = "20ms" } }
//! ```
//!
//! The deserializer is hand-written (not `#[serde(untagged)]`) so that a mistake
//! inside the table is reported with the toml crate's line and caret and a message
//! naming the accepted shapes. Value checks (LO <= HI, p99 >= median, weights) are
//! done when resolving, in [`sampler`](super::sampler).

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserializer, IntoDeserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

/// One distribution of values of type `V` ([`HumanSize`](super::HumanSize) or
/// [`HumanDuration`](super::HumanDuration)), as written in the file.
///
/// Serializes in the tagged form (`{ "fixed": X }`), also for a bare value.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dist<V> {
    /// Always `V`. TOML: `X` or `{ fixed = X }`.
    Fixed(V),
    /// Uniform over `[LO, HI]`, both inclusive. TOML: `{ uniform = [LO, HI] }`.
    Uniform([V; 2]),
    /// Log-normal given its median and 99th percentile. TOML:
    /// `{ lognormal = { median = X, p99 = Y } }`; sampled as
    /// `LogNormal(μ = ln median, σ = ln(p99/median) / 2.3263…)`, clamped to a sane range.
    #[serde(rename = "lognormal")]
    LogNormal(LogNormalSpec<V>),
    /// Discrete values drawn with the given relative weights (> 0). TOML:
    /// `{ weighted = [[X, 3], [Y, 1]] }`.
    Weighted(Vec<(V, f64)>),
}

/// The `{ median = X, p99 = Y }` table of a log-normal distribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogNormalSpec<V> {
    /// The 50th percentile.
    pub median: V,
    /// The 99th percentile; must be at least the median.
    pub p99: V,
}

/// The shapes a distribution table may name, for error messages.
const SHAPES: &[&str] = &["fixed", "uniform", "lognormal", "weighted"];

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Dist<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DistVisitor(PhantomData))
    }
}

struct DistVisitor<V>(PhantomData<V>);

impl<'de, V: Deserialize<'de>> Visitor<'de> for DistVisitor<V> {
    type Value = Dist<V>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "a value (meaning fixed) or a single-key table: { fixed = X }, { uniform = [LO, HI] }, \
             { lognormal = { median = X, p99 = Y } } or { weighted = [[X, WEIGHT], ...] }",
        )
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        V::deserialize(v.into_deserializer()).map(Dist::Fixed)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        V::deserialize(v.into_deserializer()).map(Dist::Fixed)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        V::deserialize(v.into_deserializer()).map(Dist::Fixed)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let Some(shape) = map.next_key::<String>()? else {
            return Err(de::Error::invalid_length(0, &self));
        };
        let dist = match shape.as_str() {
            "fixed" => Dist::Fixed(map.next_value()?),
            "uniform" => {
                let Pair(lo, hi) = map.next_value()?;
                Dist::Uniform([lo, hi])
            }
            "lognormal" => Dist::LogNormal(map.next_value()?),
            "weighted" => {
                let pairs: Vec<Pair<V, f64>> = map.next_value()?;
                Dist::Weighted(pairs.into_iter().map(|Pair(v, w)| (v, w)).collect())
            }
            other => return Err(de::Error::unknown_variant(other, SHAPES)),
        };
        if let Some(extra) = map.next_key::<String>()? {
            return Err(de::Error::custom(format!(
                "a distribution names exactly one shape, found `{shape}` and `{extra}`"
            )));
        }
        Ok(dist)
    }
}

/// A two-element TOML array `[A, B]`; unlike serde's tuple impl, refuses a third element.
struct Pair<A, B>(A, B);

impl<'de, A: Deserialize<'de>, B: Deserialize<'de>> Deserialize<'de> for Pair<A, B> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct PairVisitor<A, B>(PhantomData<(A, B)>);
        impl<'de, A: Deserialize<'de>, B: Deserialize<'de>> Visitor<'de> for PairVisitor<A, B> {
            type Value = Pair<A, B>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a two-element array")
            }
            fn visit_seq<S: de::SeqAccess<'de>>(self, mut seq: S) -> Result<Self::Value, S::Error> {
                let a = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let b = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(1, &self))?;
                let mut n = 2;
                while seq.next_element::<de::IgnoredAny>()?.is_some() {
                    n += 1;
                }
                if n > 2 {
                    return Err(de::Error::invalid_length(n, &self));
                }
                Ok(Pair(a, b))
            }
        }
        d.deserialize_seq(PairVisitor(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{HumanDuration, HumanSize};

    #[derive(Deserialize)]
    struct Doc {
        d: Dist<HumanSize>,
    }

    fn size(text: &str) -> Result<Dist<HumanSize>, String> {
        toml::from_str::<Doc>(text).map(|d| d.d).map_err(|e| e.to_string())
    }

    #[test]
    fn all_shapes_parse() {
        assert_eq!(size("d = 300").unwrap(), Dist::Fixed(HumanSize::from_bytes(300)));
        assert!(matches!(size("d = \"1KiB\"").unwrap(), Dist::Fixed(s) if s.bytes() == 1024));
        assert!(matches!(size("d = { fixed = 20 }").unwrap(), Dist::Fixed(_)));
        assert!(matches!(size("d = { uniform = [16, \"1KiB\"] }").unwrap(), Dist::Uniform(_)));
        let ln = size("d = { lognormal = { median = 100, p99 = 1000 } }").unwrap();
        assert!(matches!(ln, Dist::LogNormal(_)));
        let w = size("d = { weighted = [[100, 1], [\"1KiB\", 2.5]] }").unwrap();
        assert!(matches!(w, Dist::Weighted(v) if v.len() == 2 && v[1].1 == 2.5));
    }

    #[test]
    fn bad_shapes_are_refused_with_a_line() {
        let e = size("\nd = { gaussian = 3 }").unwrap_err();
        assert!(e.contains("line 2") && e.contains("gaussian"), "{e}");
        let e = size("d = { fixed = 1, uniform = [1, 2] }").unwrap_err();
        assert!(e.contains("exactly one shape"), "{e}");
        let e = size("d = { lognormal = { median = 1, p90 = 2 } }").unwrap_err();
        assert!(e.contains("p90"), "{e}");
        let e = size("d = { uniform = [1, 2, 3] }").unwrap_err();
        assert!(e.contains("line 1") && e.contains("two-element"), "{e}");
        let e = size("d = { weighted = [[1, 2, 3]] }").unwrap_err();
        assert!(e.contains("two-element"), "{e}");
        let e = size("d = { weighted = [[1]] }").unwrap_err();
        assert!(e.contains("two-element"), "{e}");
    }

    #[test]
    fn round_trips_through_toml() {
        #[derive(Serialize, Deserialize)]
        struct D {
            d: Dist<HumanDuration>,
        }
        let text = "d = { weighted = [[\"1ms\", 1.0], [\"5ms\", 3.0]] }";
        let d: D = toml::from_str(text).unwrap();
        let again: D = toml::from_str(&toml::to_string(&d).unwrap()).unwrap();
        assert_eq!(d.d, again.d);
    }
}
