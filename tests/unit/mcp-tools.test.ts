import { tools } from '../../mcp/tools.js';
import { isReadTool } from '../../mcp/tools/tool.js';
import { page, section } from '../harness/docs.js';

// A tool is one entry of its area's list in mcp/tools/: the compiler holds its schema to its arguments' type.
// What the compiler cannot see is docs/mcp.md: every tool is named there for the people who
// connect an agent, and this fails when a new one is not.

const toolsSection = section('docs/mcp.md', '## The tools');

describe('the MCP tools', () => {
  it.each(tools.map((t) => [t.name]))('%s is named in docs/mcp.md', (name) => {
    expect(toolsSection).toContain(`\`${name}\``);
  });

  it('are counted in docs/mcp.md as tools/list lists them: every tool for a write token, the read-only ones for a read token', () => {
    const [, write, read] = /# (\d+) tools with a write token, (\d+) with a read token/.exec(page('docs/mcp.md')) ?? [];
    expect([Number(write), Number(read)]).toEqual([tools.length, tools.filter(isReadTool).length]);
  });

  it('each name once', () => {
    expect(new Set(tools.map((t) => t.name)).size).toBe(tools.length);
  });
});
