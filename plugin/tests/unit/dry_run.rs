//! Unit tests of `src/dry_run.rs`.

use kubectl_uyuni::dry_run::*;
use uyuni_core::plan::Op;
use uyuni_core::render::{self, Line, LineKind};

#[test]
fn colours_follow_the_kind_of_line_not_its_text() {
    let lines = [
        Line::plain("- a data-plane line that starts like a removal ▶"),
        Line {
            kind: LineKind::Added,
            text: "+x".into(),
        },
        Line {
            kind: LineKind::Removed,
            text: "-x".into(),
        },
        Line {
            kind: LineKind::Step(Op::Create),
            text: "  1. + create".into(),
        },
        Line {
            kind: LineKind::Step(Op::Unchanged),
            text: "  2. = unchanged".into(),
        },
    ];
    assert_eq!(
        paint(&lines, true),
        "- a data-plane line that starts like a removal ▶\n\
         \x1b[32m+x\x1b[0m\n\
         \x1b[31m-x\x1b[0m\n\
         \x1b[32m  1. + create\x1b[0m\n  \
         2. = unchanged\n"
    );
    assert_eq!(paint(&lines, false), render::lines_text(&lines));
}
