//! A response body released at a fixed rate: the `throttle` action.

use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::{BodyExt, BodyStream, StreamBody};
use hyper::body::Frame;
use tokio::time::Instant;

use super::listener::{Body, BoxError};

/// Releases `body` at `kbps` kilobytes per second, in slices of a tenth of
/// a second's worth, so the client sees a slow link rather than a stall.
pub fn throttle(body: Body, kbps: u32) -> Body {
    let rate = f64::from(kbps.max(1)) * 1024.0;
    let slice = ((rate / 10.0) as usize).max(1);
    let started = Instant::now();
    let frames = BodyStream::new(body);
    let paced = futures_util::stream::unfold((frames, 0u64, None::<Bytes>), move |(mut frames, mut sent, mut pending)| async move {
        loop {
            if let Some(mut data) = pending.take() {
                let piece = data.split_to(slice.min(data.len()));
                sent += piece.len() as u64;
                // Due once the bytes sent so far fit the rate.
                let due = started + Duration::from_secs_f64(sent as f64 / rate);
                tokio::time::sleep_until(due).await;
                let rest = (!data.is_empty()).then_some(data);
                return Some((Ok::<_, BoxError>(Frame::data(piece)), (frames, sent, rest)));
            }
            match frames.next().await? {
                Ok(frame) => match frame.into_data() {
                    Ok(data) if data.is_empty() => continue,
                    Ok(data) => pending = Some(data),
                    Err(other) => return Some((Ok(other), (frames, sent, None))),
                },
                Err(e) => return Some((Err(e), (frames, sent, None))),
            }
        }
    });
    BodyExt::boxed(StreamBody::new(paced))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Full;

    #[tokio::test]
    async fn the_body_arrives_whole_and_no_faster_than_the_rate() {
        let body: Body = Full::new(Bytes::from(vec![7u8; 8 * 1024])).map_err(|never| match never {}).boxed();
        let started = Instant::now();
        let got = throttle(body, 16).collect().await.unwrap().to_bytes();
        assert_eq!(got.len(), 8 * 1024);
        assert!(got.iter().all(|b| *b == 7));
        // A lower bound only: a busy machine may be slower, never faster.
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(490), "8 KB at 16 KB/s took {took:?}");
    }
}
