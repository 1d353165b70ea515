//! The names' normal form and the index that looks a name up in any spelling.

use super::*;
use proptest::prelude::*;

#[test]
fn a_name_is_normalized_only_when_normalizing_keeps_it() {
    for s in ["web", "web_1", "deb-12", "ünï", "a\tb"] {
        assert!(is_normalized(s), "{s:?}");
        assert!(matches!(normalized(s), std::borrow::Cow::Borrowed(_)));
    }
    for (s, n) in [
        ("Web", "web"),
        (" web", "web"),
        ("web\n", "web"),
        ("a b", "a_b"),
        ("a:b", "a_b"),
        ("\u{a0}web", "web"),
        ("\u{b}web", "web"),
        ("web\u{3000}", "web"),
    ] {
        assert!(!is_normalized(s), "{s:?}");
        assert_eq!(normalized(s), n);
    }
}

proptest! {
    #[test]
    fn normalized_is_normalize_name(s in "[ a-zA-Z:_\\-\t\u{b}\u{a0}\u{3000}\u{e9}\u{c9}0-9]{0,12}") {
        let n = normalize_name(&s);
        prop_assert_eq!(&*normalized(&s), n.as_str());
        prop_assert!(is_normalized(&normalize_name(&s)));
    }
}

#[test]
fn an_index_finds_a_name_in_any_spelling() {
    let mut ix = Index::default();
    ix.map.insert("web_1".into(), 3);
    ix.default = Some(0);
    assert_eq!(ix.get("web_1"), Some(3));
    assert_eq!(ix.get(" Web:1 "), Some(3));
    assert_eq!(ix.get("WEB 1"), Some(3));
    assert_eq!(ix.get("web_2"), None);
    assert_eq!(ix.get("Default"), Some(0));
    assert_eq!(ix.get(""), Some(0));
}
