// Splits `--wipe-command "<program> [args]"` into argv without a shell: no expansion of variables,
// globs, pipes or redirections, so the operator's string cannot turn into more than one program.
// Rules: whitespace separates words; '...' is literal; "..." keeps spaces and honours \" and \\;
// a backslash outside quotes escapes the next character.

export class CommandSyntaxError extends Error {
  readonly code = 'STUB_WIPE_COMMAND_SYNTAX';
  constructor(message: string) {
    super(message);
    this.name = 'CommandSyntaxError';
  }
}

export function splitCommand(input: string): string[] {
  const words: string[] = [];
  let word = '';
  let inWord = false;
  let quote: "'" | '"' | undefined;
  for (let i = 0; i < input.length; i++) {
    const c = input[i]!;
    if (quote === "'") {
      if (c === "'") quote = undefined;
      else word += c;
      continue;
    }
    if (quote === '"') {
      if (c === '"') quote = undefined;
      else if (c === '\\' && (input[i + 1] === '"' || input[i + 1] === '\\')) word += input[++i];
      else word += c;
      continue;
    }
    if (c === "'" || c === '"') {
      quote = c;
      inWord = true;
    } else if (c === '\\') {
      if (i + 1 >= input.length) throw new CommandSyntaxError('the command ends with a lone backslash');
      word += input[++i];
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) words.push(word);
      word = '';
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (quote) throw new CommandSyntaxError(`unterminated ${quote === '"' ? 'double' : 'single'} quote in the command`);
  if (inWord) words.push(word);
  return words;
}
