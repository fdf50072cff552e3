import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  ENV_NAME_PATTERN,
  EnvTextError,
  envAssignmentProblem,
  interpolate,
  parseEnvText,
  setEnvVariables,
  unsetEnvVariable,
} from '../../common/env-text';

interface InvalidLine {
  lineNumber: number;
  line: string;
  reason: RegExp;
}

interface ReportedLine {
  lineNumber: number;
  line: string;
  reason: string;
}

/** Parses and returns the map as a plain object (the parser's map has a null prototype) with the reported lines. */
function parse(text: string | undefined): { variables: Record<string, string>; invalid: ReportedLine[] } {
  const invalid: ReportedLine[] = [];
  const variables = parseEnvText(text, {
    onInvalidLine: (lineNumber, line, reason) => invalid.push({ lineNumber, line, reason }),
  });
  return { variables: { ...variables }, invalid };
}

const parseCases: {
  name: string;
  text: string | undefined;
  expected: [string, string][];
  invalid?: InvalidLine[];
}[] = [
  { name: 'missing text is an empty map', text: undefined, expected: [] },
  { name: 'empty text is an empty map', text: '', expected: [] },
  {
    name: 'the design note example: comments, spaces around =, an invalid line, last wins',
    text: [
      '# world settings',
      'project_name = agent-world',
      'working_directory=/Users/me/project',
      'INVALID LINE',
      'project_name=agent-world-v2',
    ].join('\n'),
    expected: [
      ['project_name', 'agent-world-v2'],
      ['working_directory', '/Users/me/project'],
    ],
    invalid: [{ lineNumber: 4, line: 'INVALID LINE', reason: /=/ }],
  },
  {
    name: 'blank and whitespace-only lines and full-line comments are skipped',
    text: '\n   \n\t\n# comment\n   # indented comment\n#A=1\nB=2\n\n',
    expected: [['B', '2']],
  },
  {
    name: 'whitespace around the key and around = is ignored',
    text: '  A=1\nB  =2\nC=  3\n\t D \t=\t 4 \t\n',
    expected: [
      ['A', '1'],
      ['B', '2'],
      ['C', '3'],
      ['D', '4'],
    ],
  },
  {
    name: 'the last assignment wins',
    text: 'A=1\nB=x\nA=2\nA = 3\n',
    expected: [
      ['A', '3'],
      ['B', 'x'],
    ],
  },
  {
    name: 'keys are case-sensitive',
    text: 'path=a\nPATH=b\nPath=c',
    expected: [
      ['path', 'a'],
      ['PATH', 'b'],
      ['Path', 'c'],
    ],
  },
  {
    name: 'CRLF line ends are accepted and reported lines carry no CR',
    text: 'A=1\r\n# note\r\nbad line\r\nB = two words \r\n',
    expected: [
      ['A', '1'],
      ['B', 'two words'],
    ],
    invalid: [{ lineNumber: 3, line: 'bad line', reason: /=/ }],
  },
  {
    name: 'a leading byte-order mark is ignored',
    text: '\uFEFFA=1\nB=2',
    expected: [
      ['A', '1'],
      ['B', '2'],
    ],
  },
  {
    name: 'the value is everything after the first =',
    text: 'URL=https://x.test/?a=1&b=2\nEQ===\nEXPR = a = b',
    expected: [
      ['URL', 'https://x.test/?a=1&b=2'],
      ['EQ', '=='],
      ['EXPR', 'a = b'],
    ],
  },
  {
    name: 'empty values are kept as empty strings',
    text: 'A=\nB =   \nC=""\nD=\'\'',
    expected: [
      ['A', ''],
      ['B', ''],
      ['C', ''],
      ['D', ''],
    ],
  },
  {
    name: 'a # inside a value is part of the value (comments are full-line only)',
    text: 'COLOR=#ff0000\nNOTE=a # b\nQ="x # y"',
    expected: [
      ['COLOR', '#ff0000'],
      ['NOTE', 'a # b'],
      ['Q', 'x # y'],
    ],
  },
  {
    name: 'one pair of matching quotes is removed and the inside kept literally',
    text: [
      'D=" padded  "',
      "S=' single '",
      'ESC="a\\nb\\\\c"',
      'WIN="C:\\new\\table"',
      'INNER="say "hi""',
      'NESTED=\'"x"\'',
    ].join('\n'),
    expected: [
      ['D', ' padded  '],
      ['S', ' single '],
      ['ESC', 'a\\nb\\\\c'],
      ['WIN', 'C:\\new\\table'],
      ['INNER', 'say "hi"'],
      ['NESTED', '"x"'],
    ],
  },
  {
    name: 'unmatched or partial quotes are kept as they are',
    text: 'A="x\'\nB="\nC=x"y"\nD="x" y\nE= "x" ',
    expected: [
      ['A', '"x\''],
      ['B', '"'],
      ['C', 'x"y"'],
      ['D', '"x" y'],
      ['E', 'x'],
    ],
  },
  {
    name: 'names may hold digits, _, . and - after the first character',
    text: '_A=1\na.b-c_9=2\nZ9=3',
    expected: [
      ['_A', '1'],
      ['a.b-c_9', '2'],
      ['Z9', '3'],
    ],
  },
  {
    name: 'invalid lines are skipped and reported with their 1-based line numbers',
    text: ['A=1', 'no equals sign', '=value', '  = spaced', '9LIVES=x', 'two words=x', 'export B=2', 'C=3'].join('\n'),
    expected: [
      ['A', '1'],
      ['C', '3'],
    ],
    invalid: [
      { lineNumber: 2, line: 'no equals sign', reason: /no '='/ },
      { lineNumber: 3, line: '=value', reason: /empty name/ },
      { lineNumber: 4, line: '  = spaced', reason: /empty name/ },
      { lineNumber: 5, line: '9LIVES=x', reason: /invalid name '9LIVES'/ },
      { lineNumber: 6, line: 'two words=x', reason: /invalid name 'two words'/ },
      { lineNumber: 7, line: 'export B=2', reason: /invalid name 'export B'/ },
    ],
  },
  {
    name: '__proto__ and constructor are ordinary variables',
    text: '__proto__=polluted\nconstructor=c\ntoString=t',
    expected: [
      ['__proto__', 'polluted'],
      ['constructor', 'c'],
      ['toString', 't'],
    ],
  },
  {
    name: 'unicode values are kept',
    text: 'GREETING=héllo wörld 👋\nJA="こんにちは "',
    expected: [
      ['GREETING', 'héllo wörld 👋'],
      ['JA', 'こんにちは '],
    ],
  },
];

for (const c of parseCases) {
  test(`env text: parse: ${c.name}`, () => {
    const { variables, invalid } = parse(c.text);
    assert.deepEqual(variables, Object.fromEntries(c.expected));
    const expectedInvalid = c.invalid ?? [];
    assert.deepEqual(
      invalid.map(({ lineNumber, line }) => ({ lineNumber, line })),
      expectedInvalid.map(({ lineNumber, line }) => ({ lineNumber, line })),
    );
    expectedInvalid.forEach((expected, index) => assert.match(invalid[index]?.reason ?? '', expected.reason));
  });
}

test('env text: parse: the map has a null prototype, so unset names never reach Object members', () => {
  const variables = parseEnvText('__proto__=polluted\nA=1');
  assert.equal(Object.getPrototypeOf(variables), null);
  assert.equal(variables['constructor'], undefined);
  assert.ok(!('toString' in variables));
  assert.equal(variables['__proto__'], 'polluted');
  assert.deepEqual(Object.keys(variables), ['__proto__', 'A']);
  // Nothing leaked into ordinary objects.
  assert.equal(Object.getPrototypeOf({}), Object.prototype);
  assert.ok(!('polluted' in {}));
});

test('env text: parse: ENV_NAME_PATTERN accepts exactly the valid names', () => {
  for (const name of ['A', '_', 'a_b', 'A.B', 'a-b', 'X9', '__proto__']) assert.ok(ENV_NAME_PATTERN.test(name), name);
  for (const name of ['', '9A', '-a', '.a', 'a b', 'a=b', 'a$', 'é']) assert.ok(!ENV_NAME_PATTERN.test(name), name);
});

const setCases: {
  name: string;
  text: string | undefined;
  assignments: Record<string, string>;
  expected: string;
}[] = [
  { name: 'missing text gets one line per variable', text: undefined, assignments: { A: '1' }, expected: 'A=1\n' },
  { name: 'empty text gets one line per variable', text: '', assignments: { A: '1', B: '2' }, expected: 'A=1\nB=2\n' },
  {
    name: 'an existing key is replaced in place, keeping comments and order',
    text: '# settings\nA = 1\n\n# more\nB=2\n',
    assignments: { A: 'one' },
    expected: '# settings\nA=one\n\n# more\nB=2\n',
  },
  {
    name: 'only the last assignment of a duplicated key is replaced',
    text: 'A=1\nB=2\nA=3\n',
    assignments: { A: 'x' },
    expected: 'A=1\nB=2\nA=x\n',
  },
  {
    name: 'new keys are appended after the last line, in order',
    text: '# c\nA=1\n',
    assignments: { C: '3', B: '2', A: 'a' },
    expected: '# c\nA=a\nC=3\nB=2\n',
  },
  {
    name: 'a text without a final line end gets one before the new lines',
    text: 'A=1',
    assignments: { B: '2' },
    expected: 'A=1\nB=2\n',
  },
  {
    name: 'CRLF text keeps CRLF, for replaced and appended lines',
    text: '# c\r\nA=1\r\nB=2',
    assignments: { A: 'x', C: '3' },
    expected: '# c\r\nA=x\r\nB=2\r\nC=3\r\n',
  },
  {
    name: 'invalid lines and case-different keys are kept byte for byte',
    text: 'garbage line\n  a=lower  \n=x\n',
    assignments: { A: 'upper' },
    expected: 'garbage line\n  a=lower  \n=x\nA=upper\n',
  },
  {
    name: 'values that would not parse back are double-quoted; others stay bare',
    text: '',
    assignments: {
      PAD: ' x ',
      DQ: '"quoted"',
      SQ: "'quoted'",
      TAB: '\tx',
      EMPTY: '',
      HASH: '#not a comment',
      EQ: 'a=b',
      INNER: 'say "hi" now',
      ONE: '"',
    },
    expected: [
      'PAD=" x "',
      'DQ=""quoted""',
      'SQ="\'quoted\'"',
      'TAB="\tx"',
      'EMPTY=',
      'HASH=#not a comment',
      'EQ=a=b',
      'INNER=say "hi" now',
      'ONE="',
      '',
    ].join('\n'),
  },
];

for (const c of setCases) {
  test(`env text: set: ${c.name}`, () => {
    const result = setEnvVariables(c.text, c.assignments);
    assert.equal(result, c.expected);
    assert.deepEqual({ ...parseEnvText(result) }, { ...parseEnvText(c.text), ...c.assignments });
  });
}

const roundTripTexts = [
  undefined,
  '',
  'A=1',
  '# only a comment',
  '# c\r\nA = "x"\r\n\r\nbad\r\nA=2\r\n',
  'A=1\nB=  spaced  \n__proto__=p\n',
];
const roundTripAssignments: Record<string, string>[] = [
  { A: 'new' },
  { A: '', B: ' lead', C: 'trail ' },
  { A: '"x"', Z: "'y'", Q: '"' },
  { HOME: '/home/ü', EMOJI: '👋 {{ x }}', HASH: 'a # b' },
  Object.fromEntries([
    ['__proto__', 'safe'],
    ['constructor', 'c'],
  ]),
];

for (const [textIndex, text] of roundTripTexts.entries()) {
  for (const [assignmentIndex, assignments] of roundTripAssignments.entries()) {
    test(`env text: set round-trips through parse (text ${textIndex}, assignments ${assignmentIndex})`, () => {
      const expected: Record<string, string> = { ...parseEnvText(text), ...assignments };
      assert.deepEqual({ ...parseEnvText(setEnvVariables(text, assignments)) }, expected);
      assert.equal(Object.getPrototypeOf({}), Object.prototype);
    });
  }
}

const setProblemCases: { name: string; assignments: Record<string, string>; problem: RegExp }[] = [
  { name: 'an invalid name', assignments: { OK: '1', 'BAD NAME': 'x' }, problem: /variable name 'BAD NAME'/ },
  { name: 'an empty name', assignments: { '': 'x' }, problem: /variable name ''/ },
  { name: 'a value with a line feed', assignments: { A: 'x\ny' }, problem: /line break/ },
  { name: 'a value with a carriage return', assignments: { A: 'x\ry' }, problem: /line break/ },
];

for (const c of setProblemCases) {
  test(`env text: set refuses ${c.name} and reports it before writing`, () => {
    assert.throws(
      () => setEnvVariables('A=1\n', c.assignments),
      (error: unknown) =>
        error instanceof EnvTextError && error.name === 'EnvTextError' && c.problem.test(error.message),
    );
    const [key, value] = Object.entries(c.assignments).at(-1) ?? ['', ''];
    assert.match(envAssignmentProblem(key, value) ?? '', c.problem);
  });
}

test('env text: set: a valid assignment has no problem', () => {
  assert.equal(envAssignmentProblem('working_directory', '/tmp/x y'), undefined);
});

const unsetCases: { name: string; text: string | undefined; key: string; expected: string }[] = [
  { name: 'missing text stays empty', text: undefined, key: 'A', expected: '' },
  {
    name: 'every assignment of the key goes, with its line end',
    text: '# c\nA=1\nB=2\n  A = 3  \n\nA=4',
    key: 'A',
    expected: '# c\nB=2\n\n',
  },
  {
    name: 'comments, blank lines, invalid lines and other keys stay byte for byte',
    text: '# A=commented\n\n  bad line  \nB =  2 \nA=x\na=lower\n',
    key: 'A',
    expected: '# A=commented\n\n  bad line  \nB =  2 \na=lower\n',
  },
  { name: 'CRLF line ends are kept', text: 'A=1\r\nB=2\r\nC=3\r\n', key: 'B', expected: 'A=1\r\nC=3\r\n' },
  { name: 'an unset key changes nothing', text: 'A=1\r\n# c', key: 'Z', expected: 'A=1\r\n# c' },
  { name: 'an invalid key changes nothing', text: 'A=1\nbad key=2\n', key: 'bad key', expected: 'A=1\nbad key=2\n' },
  { name: '__proto__ is removed like any key', text: '__proto__=p\nA=1\n', key: '__proto__', expected: 'A=1\n' },
];

for (const c of unsetCases) {
  test(`env text: unset: ${c.name}`, () => {
    const result = unsetEnvVariable(c.text, c.key);
    assert.equal(result, c.expected);
    const expected: Record<string, string> = { ...parseEnvText(c.text) };
    delete expected[c.key];
    assert.deepEqual({ ...parseEnvText(result) }, expected);
  });
}

const variables: Record<string, string> = Object.fromEntries([
  ['project_name', 'agent-world'],
  ['working_directory', '/Users/me/project'],
  ['a.b', 'dotted'],
  ['loop', '{{ project_name }}'],
  ['dollar', '$& $1 $$'],
  ['city', 'Zürich 🏔'],
  ['Name', 'upper'],
  ['__proto__', 'proto value'],
]);

const interpolateCases: { name: string; template: string; expected: string }[] = [
  {
    name: 'the design note example',
    template: 'Project {{ project_name }} at {{ working_directory }}',
    expected: 'Project agent-world at /Users/me/project',
  },
  { name: 'no spaces inside the braces', template: '[{{project_name}}]', expected: '[agent-world]' },
  {
    name: 'any spaces and tabs inside the braces',
    template: '{{   project_name\t}} {{\tproject_name   }}',
    expected: 'agent-world agent-world',
  },
  { name: 'an undefined name becomes empty', template: 'a{{ missing }}b{{nope}}c', expected: 'abc' },
  { name: 'Object members are not variables', template: '<{{ constructor }}{{toString}}>', expected: '<>' },
  { name: 'a variable named __proto__ is a variable', template: '{{ __proto__ }}', expected: 'proto value' },
  { name: 'names are case-sensitive', template: '{{ Name }}/{{ name }}/{{ NAME }}', expected: 'upper//' },
  { name: 'a dotted name is a variable name', template: '{{ a.b }}', expected: 'dotted' },
  {
    name: 'expressions are left exactly as written',
    template: '{{ a + b }} {{ a.b() }} {{ project_name | upper }} {{ "x" }} {{}} {{ }} {{ 9x }}',
    expected: '{{ a + b }} {{ a.b() }} {{ project_name | upper }} {{ "x" }} {{}} {{ }} {{ 9x }}',
  },
  {
    name: 'a line break inside the braces is not a placeholder',
    template: '{{\nproject_name\n}}',
    expected: '{{\nproject_name\n}}',
  },
  {
    name: 'a single pass: values are not expanded again',
    template: 'x={{ loop }}',
    expected: 'x={{ project_name }}',
  },
  { name: 'replacement patterns in values are literal', template: '{{ dollar }}', expected: '$& $1 $$' },
  {
    name: 'unclosed and single braces are text',
    template: '{ x } {{ project_name } {{ x',
    expected: '{ x } {{ project_name } {{ x',
  },
  {
    name: 'unicode around and in values',
    template: 'Grüße aus {{ city }} — 日本語 {{city}}!',
    expected: 'Grüße aus Zürich 🏔 — 日本語 Zürich 🏔!',
  },
];

for (const c of interpolateCases) {
  test(`env text: interpolate: ${c.name}`, () => {
    assert.equal(interpolate(c.template, variables), c.expected);
  });
}

const unchangedTemplates = [
  '',
  'You are a careful agent.\nNo placeholders here.',
  'Trailing spaces   \r\nCRLF line\r\n\ttab\u0000nul',
  'Single braces { name } and }} closers and ${template} and $1',
  'Unicode: 👋 é 日本語 \uFEFF \u200B',
  'Not placeholders: {{ two words }} {{ a + b }} {{}}',
];

for (const [index, template] of unchangedTemplates.entries()) {
  test(`env text: interpolate: a template without placeholders is returned byte for byte (${index})`, () => {
    const result = interpolate(template, variables);
    assert.equal(result, template);
    assert.equal(interpolate(template, {}), template);
  });
}

test('env text: interpolate: does not change the variables or accept inherited members', () => {
  const own = { A: '1' };
  const inherited = Object.create({ B: 'inherited' }) as Record<string, string>;
  assert.equal(interpolate('{{A}}{{B}}', own), '1');
  assert.equal(interpolate('{{A}}{{B}}', inherited), '');
  assert.deepEqual(own, { A: '1' });
});

test('env text: interpolate fills placeholders from a parsed variables text', () => {
  const parsed = parseEnvText('# world\nproject_name = agent-world\nworking_directory="/Users/me/my project"\n');
  assert.equal(
    interpolate('In {{working_directory}} ({{ project_name }})', parsed),
    'In /Users/me/my project (agent-world)',
  );
});
