//! Retry with exponential backoff: the one doubling formula ([`backoff`]), the policy the
//! array drivers retry calls with ([`RetryPolicy`], [`retry`]), and which HTTP failures are
//! worth retrying.

use std::future::Future;
use std::time::Duration;

/// The delay after failed attempt `attempt` (1-based): `base` × 2^(attempt−1), at most `cap`.
pub fn backoff(attempt: u32, base: Duration, cap: Duration) -> Duration {
    let exp = attempt.saturating_sub(1).min(20);
    base.saturating_mul(1u32 << exp).min(cap)
}

/// Retry with exponential backoff and jitter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in total (1 = no retry).
    pub max_attempts: u32,
    /// The delay before the second attempt; doubles each time.
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(5),
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub fn none() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }

    /// The delay after failed attempt `attempt` (1-based): base × 2^(attempt−1), capped, with
    /// ±25 % jitter so that many callers do not retry in lockstep.
    pub fn delay(&self, attempt: u32) -> Duration {
        let raw = backoff(attempt, self.base_delay, self.max_delay);
        let jitter = 0.75 + rand::random::<f64>() * 0.5;
        raw.mul_f64(jitter).min(self.max_delay)
    }
}

/// Runs `op` until it succeeds, fails with an error `retryable` rejects, or the attempts run
/// out (the last error is returned). Each retry is logged at debug level with `what`.
pub async fn retry<T, E, F, Fut>(
    policy: &RetryPolicy,
    what: &str,
    retryable: impl Fn(&E) -> bool,
    mut op: F,
) -> Result<T, E>
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut attempt = 1;
    loop {
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) if attempt < policy.max_attempts && retryable(&e) => {
                let delay = policy.delay(attempt);
                tracing::debug!(call = what, attempt, error = %e, retry_in = ?delay, "retrying");
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Whether a transport error is safe and useful to retry: the request never reached the
/// server (connection refused or reset while connecting).
pub fn is_retryable_transport(e: &reqwest::Error) -> bool {
    e.is_connect()
}

/// A transport failure described for an error message (the error and its sources, joined
/// with `: `), and whether retrying may help: the request never reached the server, and the
/// failure is not a certificate the client does not trust (which retrying will not change).
/// reqwest's messages name the URL; callers keep credentials out of their URLs.
pub fn describe_transport(e: &reqwest::Error) -> (String, bool) {
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        src = s.source();
    }
    let retryable = is_retryable_transport(e) && !msg.contains("certificate");
    (msg, retryable)
}

/// Whether an HTTP status says "try again later" (the server did not do the work).
pub fn is_retryable_status(status: reqwest::StatusCode) -> bool {
    matches!(status.as_u16(), 429 | 502 | 503 | 504)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    fn fast(max_attempts: u32) -> RetryPolicy {
        RetryPolicy {
            max_attempts,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(4),
        }
    }

    #[tokio::test]
    async fn retries_only_what_is_retryable() {
        let calls = AtomicU32::new(0);
        let r: Result<u32, String> = retry(
            &fast(5),
            "t",
            |e: &String| e == "busy",
            || async {
                let n = calls.fetch_add(1, Ordering::SeqCst);
                if n < 2 {
                    Err("busy".to_string())
                } else {
                    Ok(n)
                }
            },
        )
        .await;
        assert_eq!(r, Ok(2));
        assert_eq!(calls.load(Ordering::SeqCst), 3);

        calls.store(0, Ordering::SeqCst);
        let r: Result<u32, String> = retry(
            &fast(5),
            "t",
            |e: &String| e == "busy",
            || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err("fatal".to_string())
            },
        )
        .await;
        assert_eq!(r, Err("fatal".into()));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn gives_up_after_max_attempts() {
        let calls = AtomicU32::new(0);
        let r: Result<(), String> = retry(
            &fast(3),
            "t",
            |_: &String| true,
            || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err("busy".to_string())
            },
        )
        .await;
        assert!(r.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn delays_grow_and_are_capped() {
        let p = RetryPolicy {
            max_attempts: 10,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(1000),
        };
        let d1 = p.delay(1);
        assert!(d1 >= Duration::from_millis(75) && d1 <= Duration::from_millis(125));
        let d3 = p.delay(3);
        assert!(d3 >= Duration::from_millis(300) && d3 <= Duration::from_millis(500));
        for a in 5..40 {
            assert!(p.delay(a) <= Duration::from_millis(1000));
        }
    }

    #[test]
    fn backoff_doubles_to_its_cap() {
        let secs: Vec<u64> = (1..=9)
            .map(|n| backoff(n, Duration::from_secs(1), Duration::from_secs(60)).as_secs())
            .collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        let cap = Duration::from_millis(500);
        assert_eq!(
            backoff(0, Duration::from_millis(20), cap),
            Duration::from_millis(20)
        );
        assert_eq!(backoff(u32::MAX, Duration::from_millis(20), cap), cap);
    }
}
