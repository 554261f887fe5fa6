// The text summary and the plan on a terminal: wrapped at the terminal's width, between words, with
// wrap-ansi (terminal columns, wide characters counted as two), each continuation under the text of
// its line (a list item's under the item). Off a terminal nothing is wrapped: one item per line.

import wrapAnsi from 'wrap-ansi';

/** Never narrower than this, so that a very narrow terminal still gets a few words per row. */
const MIN_ROOM = 20;

/**
 * Each line of `text` wrapped at `width` columns between words; a continuation is indented like the
 * line's text (`  - item` continues under `item`). A word longer than the row stays whole.
 */
export function wrapText(text: string, width: number): string {
  return text
    .split('\n')
    .map((line) => {
      const lead = /^ *(?:- )?/.exec(line)![0];
      const room = Math.max(MIN_ROOM, width - lead.length);
      return wrapAnsi(line.slice(lead.length), room, { hard: false, trim: true })
        .split('\n')
        .map((row, n) => `${n === 0 ? lead : ' '.repeat(lead.length)}${row}`)
        .join('\n');
    })
    .join('\n');
}
