//! Names close to a misspelt one, for a message that offers what the user may have meant (a
//! shipped scenario, a script). A leaf: plain strings in, plain strings out.

/// The `candidates` close to `wanted`, best first: those within a small edit distance
/// (Damerau–Levenshtein, at most a third of the longer name's length, at least 1), those
/// that contain it or that it contains, and those sharing its first three characters; empty
/// when none is.
pub fn close<'a>(wanted: &str, candidates: &[&'a str]) -> Vec<&'a str> {
    let wanted = wanted.to_lowercase();
    let mut ranked: Vec<(usize, &'a str)> = candidates
        .iter()
        .filter_map(|&name| {
            let lower = name.to_lowercase();
            let distance = strsim::damerau_levenshtein(&wanted, &lower);
            let within = distance <= (wanted.chars().count().max(lower.chars().count()) / 3).max(1);
            let nested = !wanted.is_empty() && (lower.contains(&wanted) || wanted.contains(&lower));
            let prefix = wanted.chars().count() >= 3
                && lower.chars().zip(wanted.chars()).take_while(|(a, b)| a == b).count() >= 3;
            (within || nested || prefix).then_some((distance, name))
        })
        .collect();
    ranked.sort_by_key(|&(distance, name)| (distance, name));
    ranked.into_iter().map(|(_, name)| name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHIPPED: [&str; 5] = ["fencing-soak", "bullmq-fencing-soak", "smoke", "bullmq-smoke", "throughput"];

    #[test]
    fn a_typo_a_part_and_a_shared_prefix_are_close_and_the_nearest_comes_first() {
        assert_eq!(close("smok", &SHIPPED), ["smoke", "bullmq-smoke"]);
        assert_eq!(close("soak", &SHIPPED), ["fencing-soak", "bullmq-fencing-soak"]);
        assert_eq!(close("throughputs", &SHIPPED), ["throughput"]);
        assert_eq!(close("fencing", &SHIPPED), ["fencing-soak", "bullmq-fencing-soak"]);
        assert_eq!(close("claimm", &["claim", "complete", "enqueue"]), ["claim"]);
    }

    #[test]
    fn nothing_near_gives_nothing() {
        assert!(close("latency", &SHIPPED).is_empty());
        assert!(close("", &SHIPPED).is_empty());
    }
}
