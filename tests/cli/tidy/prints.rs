//! "libraries do not print": each `println!`, `eprintln!`, `print!`,
//! `eprint!` or `dbg!` of a library file outside its test code.

use super::rust;

/// Each print of a library file outside its test code, as `file:line: name!`.
pub fn prints(rel: &str, text: &str) -> Vec<String> {
    let code = rust::code(text);
    let scan = rust::scan(&code);
    let in_test = |line: usize| {
        scan.funcs
            .iter()
            .any(|f| f.test && line >= f.line && line < f.line + f.lines)
    };
    rust::tokens(&code)
        .windows(2)
        .filter(|w| {
            matches!(
                w[0].text.as_str(),
                "println" | "eprintln" | "print" | "eprint" | "dbg"
            ) && w[1].text == "!"
        })
        .filter(|w| !in_test(w[0].line))
        .map(|w| format!("{rel}:{}: {}!", w[0].line, w[0].text))
        .collect()
}

#[cfg(test)]
mod checks {
    use super::prints;

    #[test]
    fn print_rule_fails_on_a_print_outside_tests() {
        let file = "//! x\n\
            pub fn f() {\n    eprintln!(\"warning: {}\", 1);\n}\n\
            /// println!(\"in a comment\")\n\
            pub fn g() -> &'static str { \"dbg!(x)\" }\n\
            #[cfg(test)]\nmod tests {\n    #[test]\n    fn t() { println!(\"ok in a test\"); }\n}\n";
        assert_eq!(prints("a/src/lib.rs", file), ["a/src/lib.rs:3: eprintln!"]);
    }
}
