//! The deletion of a run's keys against a real server: every key of the queue goes, counted
//! exactly, in one walk of the keyspace, and no key of another queue (nor the run lock) goes
//! with it; a queue with keys is refused by name before a run starts.

mod support;

use emq_bench::net::Control;
use emq_bench::plane::{self, PlaneError};

/// Job-row-like hashes `emq:{q}:job:<i>`, i in `0..count`, written by a script in slices of
/// 50 000 (a slice holds the server for a fraction of a second).
async fn fill(conn: &mut Control, queue: &str, count: u64) {
    const SLICE: u64 = 50_000;
    let script = redis::Script::new(
        "for i = tonumber(ARGV[2]), tonumber(ARGV[3]) - 1 do \
           redis.call('HSET', ARGV[1] .. i, 'state', 'completed', 'attempts', '1') \
         end",
    );
    let prefix = format!("emq:{{{queue}}}:job:");
    for from in (0..count).step_by(SLICE as usize) {
        let to = (from + SLICE).min(count);
        let () = script.arg(&prefix).arg(from).arg(to).invoke_async(conn).await.unwrap();
    }
}

async fn dbsize(conn: &mut Control) -> u64 {
    redis::cmd("DBSIZE").query_async(conn).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_queue_unlinks_each_of_its_keys_once_and_no_other_key() {
    let server = support::server();
    let mut conn = Control::connect(&support::connector(&server.url()), Default::default()).await.unwrap();
    const DOOMED: u64 = 200_000;
    fill(&mut conn, "doomed", DOOMED).await;
    // Its location sets, beside the rows.
    let () = redis::cmd("ZADD").arg("emq:{doomed}:completed").arg(1).arg("0").query_async(&mut conn).await.unwrap();
    // What must stay: another queue's keys, one whose name only begins like the queue's, the
    // queue's run lock (the same slot, outside `emq:{q}:`) and a key of no queue.
    fill(&mut conn, "bystander", 5_000).await;
    for key in ["emq:{doomedx}:job:1", "emq-lock:{doomed}", "unrelated"] {
        let () = redis::cmd("SET").arg(key).arg("1").query_async(&mut conn).await.unwrap();
    }
    assert_eq!(dbsize(&mut conn).await, DOOMED + 1 + 5_000 + 3);

    let mut heard = Vec::new();
    let deleted = plane::delete_queue(&mut conn, &support::keys("doomed"), |so_far| heard.push(so_far)).await.unwrap();

    assert_eq!(deleted, DOOMED + 1, "UNLINK's count: every key once");
    assert_eq!(dbsize(&mut conn).await, 5_000 + 3, "only the queue's keys went");
    let left = plane::queue_keys(&mut conn, &support::keys("doomed"), 1).await.unwrap();
    assert!(left.is_empty(), "a key of the queue is left: {left:?}");
    let exists: u64 = redis::cmd("EXISTS")
        .arg("emq:{doomedx}:job:1")
        .arg("emq-lock:{doomed}")
        .arg("unrelated")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(exists, 3);
    // Heard as it went, batch by batch, ending at the total.
    assert!(heard.len() > 1, "one report for {DOOMED} keys: {heard:?}");
    assert!(heard.windows(2).all(|w| w[0] < w[1]), "{heard:?}");
    assert_eq!(heard.last(), Some(&deleted));
    // An empty queue: nothing deleted, nothing heard.
    let again = plane::delete_queue(&mut conn, &support::keys("doomed"), |_| panic!("nothing to hear")).await.unwrap();
    assert_eq!(again, 0);
}

#[tokio::test]
async fn a_queue_with_keys_is_refused_by_name_and_force_deletes_them() {
    let server = support::server();
    let mut conn = Control::connect(&support::connector(&server.url()), Default::default()).await.unwrap();
    fill(&mut conn, "taken", 3).await;
    let queues = [support::keys("free"), support::keys("taken")];

    match plane::ensure_clean(&conn, &queues, false).await {
        Err(PlaneError::KeysExist { queue, example }) => {
            assert_eq!(queue, "taken");
            assert!(example.starts_with("emq:{taken}:job:"), "{example}");
        }
        other => panic!("not refused: {:?}", other.map_err(|e| e.to_string())),
    }
    assert_eq!(dbsize(&mut conn).await, 3, "a refusal deletes nothing");
    assert_eq!(plane::ensure_clean(&conn, &queues, true).await.unwrap(), 3);
    assert_eq!(dbsize(&mut conn).await, 0);
    assert_eq!(plane::ensure_clean(&conn, &queues, false).await.unwrap(), 0);
}
