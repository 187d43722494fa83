//! Packet Rocket's rule played by hand: a sequence of echoes and the pauses
//! worked out from the rule (pause = OWD - base - T when positive; echoes
//! of packets stamped before the last pause's end are ignored).

use fabriclab_core::transport::rocket::{Ignore, Rocket};

const US: i64 = 1_000_000;

#[test]
fn hand_played_echoes_give_the_pauses_worked_out_by_hand() {
    // T = 10 us. Times are the sender's clock; the receiver's clock runs
    // 7 us ahead, so every echoed OWD carries +7 us, which the base cancels.
    let mut r = Rocket::new(10_000_000);
    let off = 7 * US;
    // 1. OWD 50 us: the first echo sets base = 50; excess 0, no pause.
    assert_eq!(r.on_echo(100 * US, 50 * US, 50 * US + off), None);
    // 2. OWD 48 us: the base falls to 48 (+7); excess 0.
    assert_eq!(r.on_echo(110 * US, 62 * US, 48 * US + off), None);
    assert_eq!(r.base_owd_ps(), Some(55 * US));
    // 3. OWD 80 us: excess 32 > 10: held 22 us, from 200 to 222 us.
    assert_eq!(r.on_echo(200 * US, 120 * US, 80 * US + off), Some(222 * US));
    assert!(!r.may_send(221 * US) && r.may_send(222 * US));
    assert_eq!(r.poll_at(210 * US), Some(222 * US));
    // 4., 5. Packets stamped 130 and 221.999 us, before the pause's end (222):
    // ignored however high their OWD (the same queue build-up).
    assert_eq!(r.on_echo(205 * US, 130 * US, 95 * US + off), None);
    assert_eq!(r.on_echo(230 * US, 222 * US - 1, 90 * US + off), None);
    // 6. Stamped at 222 us, after the pause: OWD 63, excess 15 > 10: held 5 us.
    assert_eq!(r.on_echo(300 * US, 222 * US, 63 * US + off), Some(305 * US));
    // 7. Stamped after that pause, OWD 58: excess exactly T, no pause.
    assert_eq!(r.on_echo(400 * US, 310 * US, 58 * US + off), None);
    assert!(r.may_send(400 * US) && r.poll_at(400 * US).is_none());
    assert_eq!((r.pauses, r.paused_ps), (2, 27_000_000));
}

#[test]
fn threshold_zero_pauses_for_the_whole_excess() {
    let mut r = Rocket::new(0).with_base(Some(20 * US));
    assert_eq!(r.on_echo(0, 0, 20 * US + 1), Some(1));
    assert_eq!(r.on_echo(5, 1, 20 * US), None);
}

// The two variants of ours (not the paper's), on the same first echoes as
// the hand-played test above: T = 10 us, base 48 + 7 us.
fn warmed(ignore: Ignore) -> Rocket {
    let mut r = Rocket::new(10_000_000).with_ignore(ignore);
    assert_eq!(r.on_echo(100 * US, 50 * US, 55 * US), None);
    assert_eq!(r.on_echo(110 * US, 62 * US, 55 * US), None);
    // Excess 32 us: held 22 us, 200 -> 222 us, whatever the variant.
    assert_eq!(r.on_echo(200 * US, 120 * US, 87 * US), Some(222 * US));
    r
}

#[test]
fn extend_lets_an_ignored_echo_lengthen_the_current_pause_only() {
    let mut r = warmed(Ignore::Extend);
    // Stamped 130 us (before the end), arriving at 205 us while held, excess
    // 47 us: its end 205 + 37 = 242 us is later, so the pause runs to 242.
    assert_eq!(r.on_echo(205 * US, 130 * US, 102 * US), Some(242 * US));
    // Stamped 1 ps before 222 us, at 230 us, excess 35: end 255 us.
    assert_eq!(r.on_echo(230 * US, 222 * US - 1, 90 * US), Some(255 * US));
    // At 250 us, excess 12 us: end 252 < 255, no change.
    assert_eq!(r.on_echo(250 * US, 140 * US, 67 * US), None);
    assert!(!r.may_send(254 * US) && r.may_send(255 * US));
    // Stamped 222 us (< 255), arriving at 300 us, no longer held: ignored.
    assert_eq!(r.on_echo(300 * US, 222 * US, 70 * US), None);
    // Stamped after the end, excess 15 us: a second pause of 5 us.
    assert_eq!(r.on_echo(400 * US, 260 * US, 70 * US), Some(405 * US));
    // Two pauses (one per build-up): 22 + 20 + 13 + 5 = 60 us held.
    assert_eq!((r.pauses, r.paused_ps), (2, 60_000_000));
}

#[test]
fn during_ignores_only_echoes_of_packets_sent_during_a_pause() {
    let mut r = warmed(Ignore::During);
    // Stamped 130 us, before the pause started (200 us): it counts; held,
    // its later end (242 us) extends the pause.
    assert_eq!(r.on_echo(205 * US, 130 * US, 102 * US), Some(242 * US));
    // Stamped 221.999 us, inside the pause [200, 242): ignored.
    assert_eq!(r.on_echo(230 * US, 222 * US - 1, 97 * US), None);
    // Stamped 250 us, after it, at 300 us: excess 15, a new pause to 305 us.
    assert_eq!(r.on_echo(300 * US, 250 * US, 70 * US), Some(305 * US));
    // Stamped 260 us (before that pause), excess 11 us: end 302 < 305.
    assert_eq!(r.on_echo(301 * US, 260 * US, 66 * US), None);
    // Stamped 302 us, inside [300, 305): ignored however high.
    assert_eq!(r.on_echo(320 * US, 302 * US, 99 * US), None);
    // 22 + 20 + 5 = 47 us held over two pauses.
    assert_eq!((r.pauses, r.paused_ps), (2, 47_000_000));
}
