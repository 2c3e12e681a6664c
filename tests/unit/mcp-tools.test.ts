import { readFileSync } from 'node:fs';
import { tools } from '../../mcp/tools.js';

// A tool is one entry of its area's list in mcp/tools/: the compiler holds its schema to its arguments' type.
// What the compiler cannot see is the README: every tool is named there for the people who
// connect an agent, and this fails when a new one is not.

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const mcpSection = readme.slice(readme.indexOf('## MCP for AI agents'));

describe('the MCP tools', () => {
  it.each(tools.map((t) => [t.name]))('%s is named in the README', (name) => {
    expect(mcpSection).toContain(`\`${name}\``);
  });

  it('each name once', () => {
    expect(new Set(tools.map((t) => t.name)).size).toBe(tools.length);
  });
});
