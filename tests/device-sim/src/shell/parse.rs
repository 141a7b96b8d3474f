//! Reading a command line as Android's /system/bin/sh (mksh) would, for
//! what clients send over adb: words with '…', "…" and \ quoting, `$?`,
//! `$!` and `$0`…`$9`, the operators `;` `&&` `||` `&` `|`, and
//! redirections (`>`, `>>`, `<`, `2>`, `2>&1`). Functions, loops,
//! globbing and variables beyond those are not modelled.

/// A piece of a word, expanded when the command runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    Text(String),
    /// `$?`: the last command's exit code.
    Status,
    /// `$!`: the last background job's pid.
    LastJob,
    /// `$0`…`$9`: the script's arguments (`sh -c script name args`).
    Arg(usize),
}

pub type Word = Vec<Piece>;

#[derive(Debug, Clone, PartialEq)]
pub enum Redirect {
    /// `>x`, `>>x`, `1>x`: standard output to a file (only /dev/null keeps nothing; others are not kept either).
    Stdout(String),
    /// `2>x`.
    Stderr(String),
    /// `2>&1`.
    StderrToStdout,
    /// `<x`.
    Stdin(String),
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Simple {
    pub words: Vec<Word>,
    pub redirects: Vec<Redirect>,
}

/// How a pipeline is joined to what follows it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Then {
    Seq,
    And,
    Or,
    Background,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub pipeline: Vec<Simple>,
    pub then: Then,
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(Word),
    Op(&'static str),
}

fn tokens(line: &str) -> Result<Vec<Token>, String> {
    let mut out = vec![];
    let mut word: Word = vec![];
    let mut text = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    let flush_text = |text: &mut String, word: &mut Word| {
        if !text.is_empty() {
            word.push(Piece::Text(std::mem::take(text)));
        }
    };
    let dollar = |chars: &mut std::iter::Peekable<std::str::Chars>| -> Option<Piece> {
        match chars.peek().copied() {
            Some('?') => {
                chars.next();
                Some(Piece::Status)
            }
            Some('!') => {
                chars.next();
                Some(Piece::LastJob)
            }
            Some(d) if d.is_ascii_digit() => {
                chars.next();
                Some(Piece::Arg(d as usize - '0' as usize))
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '{' => {
                // Unset variables expand to nothing.
                while chars.peek().is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '{' || *c == '}') {
                    chars.next();
                }
                Some(Piece::Text(String::new()))
            }
            _ => None,
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => text.push(c),
                        None => return Err("syntax error: unterminated quoted string".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => text.push(c),
                            Some(c) => {
                                text.push('\\');
                                text.push(c);
                            }
                            None => return Err("syntax error: unterminated quoted string".into()),
                        },
                        Some('$') => match dollar(&mut chars) {
                            Some(piece) => {
                                flush_text(&mut text, &mut word);
                                word.push(piece);
                            }
                            None => text.push('$'),
                        },
                        Some(c) => text.push(c),
                        None => return Err("syntax error: unterminated quoted string".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(c) = chars.next() {
                    text.push(c);
                }
            }
            '$' => {
                in_word = true;
                match dollar(&mut chars) {
                    Some(piece) => {
                        flush_text(&mut text, &mut word);
                        word.push(piece);
                    }
                    None => text.push('$'),
                }
            }
            ' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>' => {
                // `2>` and `2>&1`: a lone 2 right before > is a descriptor, not a word.
                let descriptor = matches!(c, '>') && in_word && word.is_empty() && text == "2";
                if in_word && !descriptor {
                    flush_text(&mut text, &mut word);
                    out.push(Token::Word(std::mem::take(&mut word)));
                    in_word = false;
                }
                let op = match c {
                    ';' => Some(";"),
                    '&' if chars.peek() == Some(&'&') => {
                        chars.next();
                        Some("&&")
                    }
                    '&' => Some("&"),
                    '|' if chars.peek() == Some(&'|') => {
                        chars.next();
                        Some("||")
                    }
                    '|' => Some("|"),
                    '<' => Some("<"),
                    '>' if descriptor => {
                        text.clear();
                        in_word = false;
                        if chars.peek() == Some(&'&') {
                            chars.next();
                            match chars.next() {
                                Some('1') => Some("2>&1"),
                                _ => return Err("syntax error: only 2>&1 is modelled".into()),
                            }
                        } else {
                            Some("2>")
                        }
                    }
                    '>' if chars.peek() == Some(&'>') => {
                        chars.next();
                        Some(">")
                    }
                    '>' => Some(">"),
                    '\n' => Some(";"),
                    _ => None,
                };
                if let Some(op) = op {
                    out.push(Token::Op(op));
                }
            }
            c => {
                in_word = true;
                text.push(c);
            }
        }
    }
    if in_word {
        flush_text(&mut text, &mut word);
        out.push(Token::Word(word));
    }
    Ok(out)
}

/// A word's text, for redirection targets (no expansion there).
fn literal(word: &Word) -> String {
    word.iter().map(|p| if let Piece::Text(t) = p { t.as_str() } else { "" }).collect()
}

/// Parses a command line into steps.
pub fn parse(line: &str) -> Result<Vec<Step>, String> {
    let mut steps = vec![];
    let mut pipeline = vec![];
    let mut simple = Simple::default();
    let mut tokens = tokens(line)?.into_iter().peekable();
    let end_simple = |simple: &mut Simple, pipeline: &mut Vec<Simple>| -> Result<(), String> {
        if simple.words.is_empty() {
            return Err("syntax error: a command is missing".into());
        }
        pipeline.push(std::mem::take(simple));
        Ok(())
    };
    while let Some(token) = tokens.next() {
        match token {
            Token::Word(w) => simple.words.push(w),
            Token::Op(op @ (">" | "2>" | "<")) => {
                let Some(Token::Word(target)) = tokens.next() else { return Err(format!("syntax error: {op} needs a file")) };
                let target = literal(&target);
                simple.redirects.push(match op {
                    ">" => Redirect::Stdout(target),
                    "2>" => Redirect::Stderr(target),
                    _ => Redirect::Stdin(target),
                });
            }
            Token::Op("2>&1") => simple.redirects.push(Redirect::StderrToStdout),
            Token::Op("|") => end_simple(&mut simple, &mut pipeline)?,
            Token::Op(op) => {
                if simple.words.is_empty() && pipeline.is_empty() && op == ";" {
                    continue;
                }
                end_simple(&mut simple, &mut pipeline)?;
                let then = match op {
                    "&&" => Then::And,
                    "||" => Then::Or,
                    "&" => Then::Background,
                    _ => Then::Seq,
                };
                steps.push(Step { pipeline: std::mem::take(&mut pipeline), then });
            }
        }
    }
    if !simple.words.is_empty() {
        end_simple(&mut simple, &mut pipeline)?;
    }
    if !pipeline.is_empty() {
        steps.push(Step { pipeline, then: Then::Seq });
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(word: &Word) -> String {
        literal(word)
    }

    #[test]
    fn the_watchdog_line_parses_as_one_background_nohup_with_redirections() {
        let steps = parse("nohup sh -c 'sleep 95; dumpsys battery reset' faultline-watchdog-wd-1 >/dev/null 2>&1 &").unwrap();
        assert_eq!(steps.len(), 1);
        assert_eq!(steps[0].then, Then::Background);
        let simple = &steps[0].pipeline[0];
        let words: Vec<String> = simple.words.iter().map(text).collect();
        assert_eq!(words, ["nohup", "sh", "-c", "sleep 95; dumpsys battery reset", "faultline-watchdog-wd-1"]);
        assert_eq!(simple.redirects, [Redirect::Stdout("/dev/null".into()), Redirect::StderrToStdout]);
    }

    #[test]
    fn operators_quotes_and_substitutions() {
        let steps = parse(r#"false; echo "code $?" && echo x\ y || echo 'no $?'"#).unwrap();
        assert_eq!(steps.len(), 4);
        assert_eq!(steps[1].pipeline[0].words[1], vec![Piece::Text("code ".into()), Piece::Status]);
        assert_eq!(text(&steps[2].pipeline[0].words[1]), "x y");
        assert_eq!(text(&steps[3].pipeline[0].words[1]), "no $?");
        assert!(parse("echo 'open").is_err());
        assert!(parse("&& echo").is_err());
    }
}
