use super::testing::{cases, index, KINDS};
use super::*;

#[test]
fn every_kind_has_a_case_in_its_place() {
    let cases = cases(Instant::now());
    assert_eq!(cases.len(), KINDS);
    for (i, c) in cases.iter().enumerate() {
        let w = c.lost.waiting_for.as_ref().unwrap();
        assert_eq!(index(w), i, "{}", c.kind);
        assert_eq!(serde_json::to_value(w).unwrap()["kind"], c.kind);
        if let Some(t) = &c.waiting {
            assert_eq!(index(t.waiting_for.as_ref().unwrap()), i, "{}", c.kind);
        }
        for t in std::iter::once(&c.lost).chain(&c.waiting) {
            assert_eq!(t.check(), Ok(()), "{}", c.kind);
        }
    }
}

#[test]
fn a_wait_is_over_once_its_expiry_passed_or_its_event_is_recorded() {
    let now = Instant::now();
    for c in cases(now) {
        match c.waiting {
            Some(waiting) => {
                assert!(is_over(&c.lost, now), "{}", c.kind);
                assert!(!is_over(&waiting, now), "{}", c.kind);
            }
            // A queued task's wait is its admission's to end.
            None => assert!(!is_over(&c.lost, now), "{}", c.kind),
        }
    }
}

#[test]
fn an_answered_question_or_a_decided_approval_left_waiting_is_over() {
    let now = Instant::now();
    let mut cases = cases(now);
    let mut approval = cases[0].waiting.take().unwrap();
    approval.waits.approvals[0].decision = Some(crate::Decision {
        verdict: crate::Verdict::Approved,
        by: None,
        at: now,
        rule: None,
    });
    assert!(is_over(&approval, now));
    let mut reply = cases[7].waiting.take().unwrap();
    reply.waits.questions[0].reply = Some(crate::question::Reply {
        text: "staging".into(),
        by: None,
        at: now,
    });
    assert!(is_over(&reply, now));
}

#[test]
fn each_kind_says_whether_it_is_an_admission_and_where_its_event_is_first() {
    use WrittenFirst::{Children, Connections};
    // kind, admission, a person acts, written first
    let table: [(&str, bool, bool, Option<WrittenFirst>); KINDS] = [
        ("approval", false, true, None),
        ("children", false, false, Some(Children)),
        ("timer", false, false, None),
        ("capacity", true, false, None),
        ("turn", true, false, None),
        ("callback", false, false, None),
        ("connection", false, true, Some(Connections)),
        ("reply", false, true, None),
    ];
    for (c, (kind, admission, person, first)) in cases(Instant::now()).iter().zip(table) {
        let w = c.lost.waiting_for.as_ref().unwrap();
        assert_eq!(serde_json::to_value(w).unwrap()["kind"], kind);
        assert_eq!(w.is_admission(), admission, "{kind}");
        assert_eq!(
            c.waiting.is_none(),
            admission,
            "{kind}: only a queued task's wait is"
        );
        assert_eq!(w.awaits_a_person(), person, "{kind}");
        assert_eq!(w.written_first(), first, "{kind}");
    }
}

#[test]
fn a_wake_is_due_at_the_expiry_ahead_and_never_for_one_past() {
    let now = Instant::now();
    for c in cases(now) {
        // Past: the wake that noticed it runs now, no timer.
        assert_eq!(next_wake(&c.lost, now), None, "{}", c.kind);
        let Some(waiting) = c.waiting else { continue };
        let due = next_wake(&waiting, now);
        match c.kind {
            // Its children end it; without a deadline nothing else does.
            "children" => assert_eq!(due, waiting.budget.limits.deadline_at, "{}", c.kind),
            _ => assert!(due.is_some_and(|at| at > now), "{}: {due:?}", c.kind),
        }
    }
}
