use fabriclab_core::event::EventQueue;

#[test]
fn pops_in_time_order() {
    let mut q = EventQueue::new();
    for (t, e) in [(30, 'c'), (10, 'a'), (20, 'b'), (5, 'z')] {
        q.schedule(t, e);
    }
    let got: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
    assert_eq!(got, vec![(5, 'z'), (10, 'a'), (20, 'b'), (30, 'c')]);
}

#[test]
fn equal_times_leave_first_in_first_out() {
    let mut q = EventQueue::new();
    for i in 0..1000u32 {
        q.schedule(7, i);
    }
    q.schedule(3, 9999);
    assert_eq!(q.pop(), Some((3, 9999)));
    for i in 0..1000u32 {
        assert_eq!(q.pop(), Some((7, i)));
    }
    assert!(q.is_empty());
}

#[test]
fn cancelled_events_never_fire() {
    let mut q = EventQueue::new();
    let a = q.schedule(10, "a");
    q.schedule(10, "b");
    let c = q.schedule(5, "c");
    q.cancel(a);
    q.cancel(c);
    assert_eq!(q.peek_time(), Some(10));
    assert_eq!(q.pop(), Some((10, "b")));
    assert_eq!(q.pop(), None);
}
