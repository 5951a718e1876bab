//! The scripts a load of a plan may call, known before anything starts: a capacity search
//! refuses an objective on a script its scenario never calls before any server is started.

use crate::bullmq::BullOps;
use crate::echomq::EchoOps;
use crate::lua::{Protocol, Script};
use crate::net::Control;
use crate::queue::{Chore, QueueOps, Verb};
use crate::scenario::Plan;

/// The scripts the load of `plan` may call, in [`Script::index`] order: a superset (a script
/// left out is never called; one listed may not be, e.g. `complete` when every attempt fails).
/// The protocol's own mapping of verbs to scripts decides, as the load records them.
pub fn scripts_called(plan: &Plan) -> Vec<Script> {
    let mut scripts = match plan.protocol {
        Protocol::EchoMqV1 => called::<EchoOps<Control>>(plan),
        Protocol::BullMq => called::<BullOps<Control>>(plan),
    };
    scripts.sort_by_key(|s| s.index());
    scripts.dedup();
    scripts
}

fn called<Q: QueueOps>(plan: &Plan) -> Vec<Script> {
    let mut out = Vec::new();
    let (p, c) = (&plan.producers, &plan.consumers);
    if p.count > 0 {
        // Each kind of add the producers may draw: with a delay or not, with a priority or
        // not (a deliberate duplicate asks for one).
        let delays = [(p.delayed.get() < 1.0).then_some(None), (p.delayed.get() > 0.0).then_some(Some(1))];
        let priorities = [None, (p.priority.get() > 0.0 || p.duplicate.get() > 0.0).then_some(1)];
        for delay in delays.into_iter().flatten() {
            for priority in priorities {
                out.push(Q::enqueue_script(delay, priority));
            }
        }
    }
    if c.count > 0 {
        out.extend([Q::script(Verb::Claim), Q::script(Verb::Complete)]);
        out.extend(Q::fail_scripts(c.fail));
        if c.extend_every.is_some() {
            out.push(Q::script(Verb::Extend));
        }
        if c.progress > 0 {
            out.push(Q::script(Verb::Progress));
        }
    }
    out.extend(Q::CHORES.iter().filter(|chore| chore.every(&plan.maintenance).is_some()).map(|chore| match chore {
        Chore::Reap => Q::script(Verb::Reap),
        Chore::Promote => Q::script(Verb::Promote),
        Chore::Clean => Q::script(Verb::Clean),
    }));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(toml: &str) -> Vec<&'static str> {
        let plan = crate::scenario::parse(toml, std::path::Path::new("t.toml")).unwrap();
        scripts_called(&plan).into_iter().map(Script::name).collect()
    }

    #[test]
    fn the_scripts_follow_the_scenario() {
        let base = "name = \"t\"\nseed = 1\nduration = \"1s\"\n";
        assert_eq!(names(base), ["enqueue", "claim", "complete", "reap", "promote"]);
        let busy = format!("{base}[producers]\ndelayed = 0.1\n[consumers]\nfail = 0.1\nprogress = 2\nextend = true\n");
        assert_eq!(
            names(&busy),
            ["enqueue", "enqueue_delayed", "claim", "complete", "fail", "extend", "progress", "reap", "promote"]
        );
        let retained = format!("{base}[maintenance]\nclean = \"1s\"\n");
        assert_eq!(names(&retained), ["enqueue", "claim", "complete", "reap", "promote", "clean"]);
        let bull = format!("{base}protocol = \"bullmq\"\n");
        assert_eq!(
            names(&bull),
            ["addStandardJob", "moveToActive", "moveToFinished", "retryJob", "moveToDelayed", "moveStalledJobsToWait"]
        );
    }
}
