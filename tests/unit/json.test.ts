import { ApiError } from '../../gateway/engine/errors/catalogue.js';
import { exactInDouble, parseJsonText } from '../../gateway/engine/request/json.js';

// The one JSON reader of request bodies: JSON.parse's value, with a key given twice refused
// anywhere in the text, and (when asked) a number a double cannot hold exactly.

const refusal = (text: string, exactNumbers = false): string => {
  try {
    parseJsonText(text, { exactNumbers });
  } catch (err) {
    if (err instanceof ApiError) return err.body().message;
    throw err;
  }
  throw new Error(`accepted ${text}`);
};

describe('parseJsonText', () => {
  it('reads what JSON.parse reads', () => {
    for (const text of [
      '{}',
      '[]',
      '[{},{}]',
      '{"a":{"b":[1,{"c":"}"}]},"b":"\\"{"}',
      '"x"',
      '12',
      'null',
      ' [ 1 , 2 ] ',
    ]) {
      expect(parseJsonText(text)).toEqual(JSON.parse(text));
    }
  });

  it('refuses invalid JSON', () => {
    expect(refusal('{oops')).toBe('Empty or invalid json');
    expect(refusal('')).toBe('Empty or invalid json');
  });

  it('refuses a key given twice, at any depth, naming where', () => {
    expect(refusal('{"amount":1,"amount":5000}')).toBe('Invalid request body: amount is given twice');
    expect(refusal('[{"a":1},{"a":1,"b":{"c":1,"c":2}}]')).toBe('Invalid request body: [1].b.c is given twice');
    expect(refusal('{"a\\u0062":1,"ab":2}')).toBe('Invalid request body: ab is given twice');
    expect(refusal('{"x":[{}, {"k":1,"k":1}]}')).toBe('Invalid request body: x[1].k is given twice');
  });

  it('refuses nesting deeper than 100 levels, without recursion', () => {
    expect(parseJsonText('['.repeat(100) + ']'.repeat(100))).toBeDefined();
    expect(refusal('['.repeat(101) + ']'.repeat(101))).toBe('Invalid request body: the JSON nests too deeply');
    expect(refusal('{"a":'.repeat(50000) + '1' + '}'.repeat(50000))).toBe(
      'Invalid request body: the JSON nests too deeply',
    );
  });

  it('keeps keys of different objects apart, and strings that look like keys', () => {
    expect(parseJsonText('[{"a":1},{"a":2}]')).toEqual([{ a: 1 }, { a: 2 }]);
    expect(parseJsonText('{"a":{"a":{"a":1}},"b":["a","a"],"c":"\\"a\\":"}')).toBeDefined();
    expect(parseJsonText('{"a":{},"b":[],"c":{}}')).toEqual({ a: {}, b: [], c: {} });
  });

  it('with exactNumbers, refuses a number a double changes, naming where', () => {
    expect(refusal('{"a":[1,2,1e400]}', true)).toMatch(/^Invalid request body: a\[2\]: the number 1e400 /);
    expect(refusal('{"amount":1.00000000000000001}', true)).toMatch(/amount: the number 1.00000000000000001 /);
    expect(refusal('12345678901234567890.12', true)).toMatch(/the body: the number/);
    expect(parseJsonText('{"a":[0.1,-0,1e21,123456789012.3457,1E+2,5e-324]}', { exactNumbers: true })).toEqual({
      a: [0.1, -0, 1e21, 123456789012.3457, 100, 5e-324],
    });
    // Without it the value is JSON.parse's: the engine writes the text itself.
    expect(parseJsonText('{"a":1e400}')).toEqual({ a: Infinity });
  });
});

describe('exactInDouble', () => {
  it.each([
    ['0', true],
    ['0.1', true],
    ['100000000000000000000', true],
    ['9007199254740993', false],
    ['999999999999.9997', false],
    ['1.00000000000000001', false],
    ['1.5e308', true],
    ['1e309', false],
    ['1e-400', false],
    ['-0.0', true],
  ])('%s: %s', (token, exact) => expect(exactInDouble(token)).toBe(exact));
});
