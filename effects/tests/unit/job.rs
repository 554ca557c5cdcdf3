//! `job`: log tails and the splitting of a followed log into lines.

use futures::StreamExt;
use uyuni_effects::job::{LogChunk, lines, tail_lines};

#[test]
fn tail_keeps_the_last_lines() {
    assert_eq!(tail_lines("a\nb\nc\n", 2), ["b", "c"]);
    assert_eq!(tail_lines("a\nb", 5), ["a", "b"]);
    assert!(tail_lines("", 3).is_empty());
    assert!(tail_lines("a\n", 0).is_empty());
}

#[tokio::test]
async fn lines_split_and_survive_bad_utf8() {
    let data: &[u8] = b"one\r\ntwo\n\xffthree";
    let reader = futures::io::BufReader::new(futures::io::Cursor::new(data.to_vec()));
    let got: Vec<String> = lines(Box::pin(reader))
        .filter_map(|c| async move {
            match c {
                LogChunk::Line(l) => Some(l),
                _ => None,
            }
        })
        .collect()
        .await;
    assert_eq!(got, ["one", "two", "\u{fffd}three"]);
}
