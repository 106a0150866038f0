// A node message's header line kept as texts with integers between them, for a bus that writes
// bytes: texts that messages repeat are encoded once and the integers written digit by digit,
// no string made (docs/decisions/0263-header-lines-written-as-bytes.md). String(line) is the
// line itself, for every other bus.

export class NumberedLine {
  /**
   * @param texts One more than `numbers`: the text before the first number, between each two,
   *   and after the last. An array kept and passed again while its texts stay the same, so that a
   *   writer can keep their bytes by the array.
   */
  constructor(
    readonly texts: readonly string[],
    readonly numbers: readonly number[],
  ) {}

  toString(): string {
    let s = this.texts[0];
    for (let i = 0; i < this.numbers.length; i++) s += String(this.numbers[i]) + this.texts[i + 1];
    return s;
  }
}
