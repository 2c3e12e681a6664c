import { setUpBlog, tearDown, type BlogSuite } from './harness/suite.js';
import { caseRunner, type Case } from './harness/cases.js';

// Several exposed schemas, as PostgREST serves them (its multiple-schema cases, on a fixture of
// ours: tests/fixtures/conformance-profiles.sql): Accept-Profile picks one, the first is the
// default, and every answer names the schema it read in Content-Profile. A schema's name may
// hold any character but a comma (the list's separator).

const ODD = 'Odd "@/\\#~_-';

let s: BlogSuite;
const { check } = caseRunner(() => s);

const CASES: Case[] = [
  {
    name: 'the first schema is the default, and the answer names it',
    method: 'GET',
    path: 'parents?order=id',
    status: 200,
    json: [
      { id: 1, name: 'parent v1-1' },
      { id: 2, name: 'parent v1-2' },
    ],
    out: { 'Content-Profile': 'pv1' },
  },
  {
    name: 'Accept-Profile picks another',
    method: 'GET',
    path: 'parents?order=id',
    headers: { 'Accept-Profile': 'pv2' },
    status: 200,
    json: [
      { id: 3, name: 'parent v2-3' },
      { id: 4, name: 'parent v2-4' },
    ],
    out: { 'Content-Profile': 'pv2' },
  },
  {
    name: 'a table of another schema is not found in the one asked for',
    method: 'GET',
    path: 'another_table',
    headers: { 'Accept-Profile': 'pv1' },
    status: 404,
    json: {
      code: 'PGRST205',
      message: "Could not find the table 'pv1.another_table' in the schema cache",
      details: null,
      hint: null,
    },
  },
  {
    name: 'a schema named with marks is served, embeds included',
    method: 'GET',
    path: 'names?select=name,languages(name)&order=id',
    headers: { 'Accept-Profile': ODD },
    status: 200,
    json: [
      { name: 'John', languages: { name: 'English' } },
      { name: 'José', languages: { name: 'Spanish' } },
    ],
    out: { 'Content-Profile': ODD },
  },
  {
    name: 'a schema that is not exposed is a 406 listing those that are',
    method: 'GET',
    path: 'parents',
    headers: { 'Accept-Profile': 'unknown' },
    status: 406,
    json: {
      code: 'PGRST106',
      message: `The schema must be one of the following: pv1, pv2, ${ODD}`,
      details: null,
      hint: 'Use Accept-Profile with an exposed schema',
    },
  },
];

describe('several exposed schemas, as PostgREST serves them', () => {
  beforeAll(async () => {
    s = await setUpBlog(['conformance-profiles.sql'], { TALLY_DB_SCHEMAS: `pv1,pv2,${ODD}` });
  });
  afterAll(() => tearDown(s.db, s.t));

  for (const c of CASES) it(c.name, () => check(c));
});
