//! The connection loop: write what the callers queued, read and hand out replies, watch for a
//! silent server, reconnect when the connection is lost.

use super::{reply, DialSpec, Shared, State};
use crate::lua::Script;
use crate::net::{ConnectOptions, Connector, Stream};
use crate::resp::error::CallError;
use crate::resp::registry::ScriptRegistry;
use crate::resp::request::Request;
use redis::Value;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::time::Sleep;

/// First read buffer size; it grows (doubling) for replies larger than what is free.
const READ_BUFFER: usize = 64 * 1024;
/// A read gets at least this much room: the tail is compacted (or the buffer grown) below it.
const MIN_READ: usize = 4 * 1024;
/// Reads per driver poll before it yields to its callers (they are waiting for these replies).
const READS_PER_POLL: usize = 16;
/// Replies handed out per driver poll (see [`read`]): at least a whole window of 1 connection
/// x 64 in flight, so it costs one write, one read and one wake-up, as redis-benchmark's does.
/// Fewer per poll run a window as pieces, each with its own write, read and wake-up: the
/// server never idles, but the client pays more CPU per request than redis-benchmark does.
/// It is 256 because a deeper window's replies come back in reads of more than 64 (the server
/// answers as it goes), which 64 per poll would split into two writes of next requests.
/// Producers queue the next requests before they record the replies just read, so the server
/// works while they record.
const REPLIES_PER_POLL: usize = 256;
/// Reconnect backoff: 10 ms doubling to 1 s, as redis-rs' ConnectionManager does here.
const FIRST_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// How often requests queued on an unreachable node's connection are refused.
const UNREACHABLE_POLL: Duration = Duration::from_millis(5);

/// Serves the connection (`shared.stream`, open) until it fails, then reconnects with backoff,
/// forever; the task ends when the load thread's `LocalSet` is dropped. While it is down,
/// `shared.stream` is `None` (a lane's flush then leaves the writing to this task).
pub(super) async fn run(shared: Rc<Shared>, target: DialSpec) {
    loop {
        let err = serve(&shared, &target).await;
        shared.state.borrow_mut().fail_all(err);
        let lost = shared.stream.borrow_mut().take();
        if let Some(mut stream) = lost {
            let _ = stream.shutdown().await;
        }
        let stream = reconnect(&shared, &target).await;
        *shared.stream.borrow_mut() = Some(stream);
    }
}

/// Opens a new connection, retrying with backoff. Requests made meanwhile stay queued (they
/// are written once the handshake is done) until the oldest has waited the response timeout;
/// then they fail, and the retries go on. Once an attempt has failed, the node is taken for
/// unreachable: when the options ask for it (a cluster's load), requests queued from then on
/// fail at once as [`CallError::Unsent`] (none of them was written), so the cluster client can
/// send them to the node that takes over.
async fn reconnect(shared: &Shared, target: &DialSpec) -> Stream {
    let timeout = target.opts.response_timeout;
    let mut backoff = FIRST_BACKOFF;
    let mut refused: Option<String> = None;
    loop {
        let next_try = Instant::now() + backoff;
        loop {
            // Wake up for the queued requests' deadline too, not only for the next attempt
            // (a request queued during this sleep is looked at after it: at most 1 s late),
            // and every few ms while the node is unreachable, to refuse what was queued.
            let expiry = shared.state.borrow_mut().expire(timeout);
            let mut until = expiry.map_or(next_try, |at| at.min(next_try));
            if let Some(why) = &refused {
                shared.state.borrow_mut().fail_all(CallError::Unsent(why.clone()));
                until = until.min(Instant::now() + UNREACHABLE_POLL);
            }
            tokio::time::sleep_until(until.into()).await;
            if Instant::now() >= next_try {
                break;
            }
        }
        match open(target).await {
            Ok(stream) => {
                crate::net::connector::note_reconnect();
                return stream;
            }
            Err(err) if target.opts.refuse_when_unreachable => {
                shared.state.borrow_mut().fail_all(CallError::Unsent(err.to_string()));
                refused = Some(err.to_string());
            }
            Err(_) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Opens a connection through the target's connector (TCP with TCP_NODELAY, then TLS when
/// asked), then AUTH, SELECT and SCRIPT LOAD of every script, pipelined, each reply checked.
///
/// Errors: connect/handshake failure or timeout as [`CallError::Connection`]; an endpoint
/// whose first answer is not RESP, or that closes the connection before answering, as
/// [`CallError::NotRedis`]; or the handshake's error reply.
pub(super) async fn open(target: &DialSpec) -> Result<Stream, CallError> {
    open_stream(&target.connector, &target.opts, Some(&target.registry)).await
}

/// [`open`] without the pipe's driver: a handshaken stream (AUTH, SELECT, CLIENT SETNAME as
/// `opts` asks, and SCRIPT LOAD of every script when `registry` is given) for a caller that
/// speaks RESP itself (the checker's row reader).
///
/// Errors: as [`open`].
pub(crate) async fn open_stream(
    connector: &Connector,
    opts: &ConnectOptions,
    registry: Option<&ScriptRegistry>,
) -> Result<Stream, CallError> {
    let t = connector.endpoint();
    let lost =
        |what: &str, e: &dyn std::fmt::Display| CallError::Connection(format!("{}:{}: {what}: {e}", t.host, t.port));
    let mut stream = connector.connect(opts.connect_timeout).await?;
    let mut steps: Vec<(Request, Option<Script>)> = Vec::new();
    if let Some(password) = &t.password {
        let auth = match &t.user {
            Some(user) => Request::from_args(&["AUTH", user, password.expose()]),
            None => Request::from_args(&["AUTH", password.expose()]),
        };
        steps.push((auth, None));
    }
    if t.db != 0 {
        steps.push((Request::from_args(&["SELECT", &t.db.to_string()]), None));
    }
    if let Some(name) = opts.client_name {
        steps.push((Request::from_args(&["CLIENT", "SETNAME", name]), None));
    }
    if let Some(registry) = registry {
        for script in registry.scripts() {
            steps.push((registry.load_request(script), Some(script)));
        }
    }
    let mut out = Vec::new();
    for (request, _) in &steps {
        request.write_packed(&mut out);
    }
    let handshake = async {
        // Nothing read yet: a write refused, a reset or an end of stream means the endpoint
        // closed the connection without answering (not a Redis/Valkey server).
        stream.write_all(&out).await.map_err(|_| CallError::from(connector.closed_without_reply()))?;
        let mut buf = Vec::with_capacity(4096);
        let mut replies = Vec::with_capacity(steps.len());
        while replies.len() < steps.len() {
            let nothing_yet = replies.is_empty() && buf.is_empty();
            match stream.read_buf(&mut buf).await {
                Ok(0) | Err(_) if nothing_yet => return Err(connector.closed_without_reply().into()),
                Ok(0) => return Err(lost("handshake", &"the server closed the connection")),
                Err(e) => return Err(lost("handshake read", &e)),
                Ok(_) => {}
            }
            let mut start = 0;
            loop {
                match reply::decode(&buf[start..]) {
                    Ok(Some((value, used))) => {
                        replies.push(value);
                        start += used;
                    }
                    Ok(None) => break,
                    // The first answer is not RESP at all: say what it was, not where it broke.
                    Err(e) if replies.is_empty() => {
                        return Err(connector.not_resp(&buf).map(CallError::from).unwrap_or(lost("handshake", &e)))
                    }
                    Err(e) => return Err(lost("handshake", &e)),
                }
            }
            buf.drain(..start);
        }
        Ok(replies)
    };
    let replies = match tokio::time::timeout(opts.response_timeout, handshake).await {
        Ok(replies) => replies?,
        Err(_) => return Err(lost("handshake", &"timed out")),
    };
    for ((_, script), value) in steps.iter().zip(replies) {
        let value = value?;
        match (script, registry) {
            (Some(script), Some(registry)) => registry.check_loaded(*script, &value)?,
            _ if value == Value::Okay => {}
            _ => return Err(CallError::Reply(format!("AUTH/SELECT/CLIENT SETNAME replied {value:?}"))),
        }
    }
    Ok(stream)
}

/// The read side's buffer: `data[start..end]` holds bytes not decoded yet.
struct Inbox {
    data: Vec<u8>,
    start: usize,
    end: usize,
    /// When the last read returned: the read time of every reply it brought.
    read_at: Instant,
}

impl Inbox {
    /// Room for the next read: moves undecoded bytes to the front when little room is left
    /// (so reads stay large), or doubles the buffer when one reply is larger than it.
    fn make_room(&mut self) {
        if self.data.len() - self.end >= MIN_READ {
            return;
        }
        if self.start > 0 {
            self.data.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.data.len() - self.end < MIN_READ {
            self.data.resize(self.data.len() * 2, 0);
        }
    }
}

/// Runs the connection (`shared.stream`) until it fails; returns why.
async fn serve(shared: &Shared, target: &DialSpec) -> CallError {
    let timeout = target.opts.response_timeout;
    // One timer for the connection, not one per request: when it fires with requests waiting,
    // it is moved to the real deadline (the later of the last read and the queue's start,
    // plus the timeout), so a silent server is declared timed out on time, not a period late.
    // Elapsed at once: the first poll arms it (see the loop below).
    let mut watchdog: Pin<Box<Sleep>> = Box::pin(tokio::time::sleep(Duration::ZERO));
    let mut inbox = Inbox { data: vec![0; READ_BUFFER], start: 0, end: 0, read_at: Instant::now() };
    poll_fn(|cx| {
        let mut st = shared.state.borrow_mut();
        let mut stream = shared.stream.borrow_mut();
        let stream = stream.as_mut().expect("a connection being served is open");
        st.driver_woken = false;
        super::register(&mut st.driver, cx);
        // A write that failed in a lane's flush fails the connection here: retrying it could
        // send twice what TLS had already taken.
        if let Some(err) = st.write_error.take().or_else(|| flush(&mut st, stream, cx).err()) {
            // Replies already read were answered by the server: hand them out before failing
            // the rest, rather than report them as unknown outcomes.
            let mut everything = usize::MAX;
            let _ = hand_out(&mut st, &mut inbox, &mut everything);
            return Poll::Ready(err);
        }
        if let Err(err) = read(&mut st, stream, &mut inbox, cx) {
            return Poll::Ready(err);
        }
        // Polled with nothing waiting too, and re-armed a timeout ahead when it fires then: a
        // lane's flush writes without waking this task, so the timer must already be running
        // when a request is queued on an idle connection.
        while watchdog.as_mut().poll(cx).is_ready() {
            let now = Instant::now();
            let deadline = match st.queue.is_empty() {
                true => now + timeout,
                false => st.last_read.max(st.waiting_since) + timeout,
            };
            if now >= deadline {
                return Poll::Ready(CallError::Timeout);
            }
            watchdog.as_mut().reset(deadline.into());
        }
        Poll::Pending
    })
    .await
}

/// Writes the queued requests; stops when the socket is full (`cx`'s waker is registered). Each
/// write that takes bytes stamps the requests it began to send with the instant just before
/// it: a loopback `write` returns only after the kernel delivered the bytes, which belongs to
/// the service time, not to the send lag.
///
/// `Ok(true)` when everything is on the socket; `Ok(false)` when the socket (or, with TLS,
/// the stream's own buffer) still holds some back and `cx`'s waker is registered for it.
pub(super) fn flush(st: &mut State, stream: &mut Stream, cx: &mut Context<'_>) -> Result<bool, CallError> {
    while st.written < st.out.len() {
        let before = (st.unsent > 0).then(Instant::now);
        match Pin::new(&mut *stream).poll_write(cx, &st.out[st.written..]) {
            Poll::Ready(Ok(0)) => return Err(CallError::Connection("the server stopped reading".into())),
            Poll::Ready(Ok(n)) => {
                st.written += n;
                if let Some(at) = before {
                    st.mark_sent(at);
                }
            }
            Poll::Ready(Err(e)) => return Err(CallError::Connection(format!("write: {e}"))),
            Poll::Pending => return Ok(false),
        }
    }
    st.out.clear();
    st.written = 0;
    // TLS may still hold encrypted bytes of what was accepted; plain TCP returns at once.
    match Pin::new(&mut *stream).poll_flush(cx) {
        Poll::Ready(Err(e)) => Err(CallError::Connection(format!("write: {e}"))),
        Poll::Ready(Ok(())) => Ok(true),
        Poll::Pending => Ok(false),
    }
}

/// Reads what the socket has, decodes whole replies and hands each to its request. The clock
/// is read once per read: that instant is the read time of every reply in it.
///
/// At most [`REPLIES_PER_POLL`] replies are handed out per poll; then the driver yields, the
/// woken callers queue their next requests, and the next poll writes those before it hands out
/// more. A deeper pipeline than that runs in slices, the server working on one while the
/// client handles the next.
fn read(st: &mut State, stream: &mut Stream, inbox: &mut Inbox, cx: &mut Context<'_>) -> Result<(), CallError> {
    let mut budget = REPLIES_PER_POLL;
    for _ in 0..READS_PER_POLL {
        if !hand_out(st, inbox, &mut budget)? {
            cx.waker().wake_by_ref();
            return Ok(());
        }
        inbox.make_room();
        let mut buf = ReadBuf::new(&mut inbox.data[inbox.end..]);
        match Pin::new(&mut *stream).poll_read(cx, &mut buf) {
            Poll::Pending => return Ok(()),
            Poll::Ready(Err(e)) => return Err(CallError::Connection(format!("read: {e}"))),
            Poll::Ready(Ok(())) if buf.filled().is_empty() => {
                return Err(CallError::Connection("the server closed the connection".into()))
            }
            Poll::Ready(Ok(())) => {
                inbox.end += buf.filled().len();
                inbox.read_at = Instant::now();
                st.last_read = inbox.read_at;
            }
        }
    }
    // More may be waiting: come back after the callers have run.
    cx.waker().wake_by_ref();
    Ok(())
}

/// Hands out whole replies from the inbox while `budget` lasts; false when the budget ran out
/// with replies possibly left.
fn hand_out(st: &mut State, inbox: &mut Inbox, budget: &mut usize) -> Result<bool, CallError> {
    while inbox.start < inbox.end {
        if *budget == 0 {
            return Ok(false);
        }
        match reply::decode(&inbox.data[inbox.start..inbox.end]) {
            Ok(Some((value, used))) => {
                inbox.start += used;
                *budget -= 1;
                st.deliver(value, inbox.read_at)?;
            }
            Ok(None) => break,
            Err(msg) => return Err(CallError::Connection(msg)),
        }
    }
    if inbox.start == inbox.end {
        inbox.start = 0;
        inbox.end = 0;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::lane::ReplyLane;
    use crate::resp::pipe::PipeConn;

    /// A read that brought more replies than one poll hands out (a window deeper than
    /// [`REPLIES_PER_POLL`]): the first poll stops at the budget and says so, the rest stay in
    /// the inbox and go out at the next poll with the read time of the read that brought them.
    #[test]
    fn replies_beyond_the_budget_wait_in_the_inbox_with_their_read_time() {
        let conn = PipeConn::unopened();
        let mut lane = conn.lane();
        let n = REPLIES_PER_POLL + 3;
        for _ in 0..n {
            lane.queue(&Request::from_args(&["INCR", "k"]));
        }
        let read_at = Instant::now();
        let mut inbox = Inbox { data: b":1\r\n".repeat(n), start: 0, end: 4 * n, read_at };
        let mut st = conn.shared.state.borrow_mut();
        st.written = st.out.len();
        st.mark_sent(read_at);
        let mut budget = REPLIES_PER_POLL;
        assert!(!hand_out(&mut st, &mut inbox, &mut budget).unwrap(), "the budget ran out");
        assert_eq!(
            (st.lanes[0].replies.len(), inbox.start, inbox.end),
            (REPLIES_PER_POLL, 4 * REPLIES_PER_POLL, 4 * n)
        );
        // The next poll hands out the rest before it reads again.
        let mut budget = REPLIES_PER_POLL;
        assert!(hand_out(&mut st, &mut inbox, &mut budget).unwrap());
        assert_eq!((st.lanes[0].replies.len(), inbox.start, inbox.end, budget), (n, 0, 0, REPLIES_PER_POLL - 3));
        assert!(st.lanes[0].replies.iter().all(|r| matches!(r.result, Ok(Value::Int(1)))));
        // Handed out a poll later, still timed by the read that brought them.
        assert!(st.lanes[0].replies.iter().all(|r| r.times.is_some_and(|t| t.read == read_at)));
    }
}
