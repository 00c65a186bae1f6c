//! Incremental Server-Sent Events framing: bytes in (as they arrive), complete `data`
//! payloads out. Kept by hand because each payload must carry the arrival time of the bytes
//! that completed it.

#[derive(Debug, Default)]
pub(crate) struct SseDecoder {
    buf: Vec<u8>,
}

impl SseDecoder {
    /// Feeds bytes; returns the data payloads of every event completed by them. The buffer
    /// is shifted once per call, not once per event.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        let mut start = 0;
        while let Some((end, sep)) = find_event_end(&self.buf[start..]) {
            if let Some(d) = data_of(&self.buf[start..start + end]) {
                out.push(d);
            }
            start += end + sep;
        }
        if start > 0 {
            self.buf.drain(..start);
        }
        out
    }

    /// Whatever was left unterminated when the stream closed.
    pub fn finish(&mut self) -> Vec<String> {
        if self.buf.iter().all(|b| b.is_ascii_whitespace()) {
            return Vec::new();
        }
        self.buf.extend_from_slice(b"\n\n");
        self.push(&[])
    }
}

/// The `data` of one event (its lines joined by newlines), if it has any.
fn data_of(event: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(event);
    let mut data: Option<String> = None;
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if let Some(rest) = line.strip_prefix("data:") {
            let rest = rest.strip_prefix(' ').unwrap_or(rest);
            match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(rest);
                }
                None => data = Some(rest.to_string()),
            }
        }
    }
    data
}

fn find_event_end(buf: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    while i + 1 < buf.len() {
        if buf[i] == b'\n' && buf[i + 1] == b'\n' {
            return Some((i, 2));
        }
        if i + 3 < buf.len() && &buf[i..i + 4] == b"\r\n\r\n" {
            return Some((i, 4));
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_events_split_anywhere() {
        let stream = b"data: {\"a\":1}\n\ndata: {\"b\":2}\r\n\r\n: comment\n\ndata: [DONE]\n\n";
        for cut in 0..stream.len() {
            let mut d = SseDecoder::default();
            let mut got = d.push(&stream[..cut]);
            got.extend(d.push(&stream[cut..]));
            got.extend(d.finish());
            assert_eq!(
                got,
                vec!["{\"a\":1}", "{\"b\":2}", "[DONE]"],
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn joins_multi_line_data_and_flushes_the_tail() {
        let mut d = SseDecoder::default();
        assert_eq!(d.push(b"data: x\ndata: y\n\ndata: z"), vec!["x\ny"]);
        assert_eq!(d.finish(), vec!["z"]);
    }
}
