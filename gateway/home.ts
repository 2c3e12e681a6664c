import { Router } from 'express';

// The landing page at `/`: what this server serves and where each description lives, for a
// person in a browser (HTML) or a client (JSON, any other Accept). It holds no data and needs
// no token; the finance app's surfaces are listed only where the server serves them.

interface Link {
  path: string;
  what: string;
}

function links(app: boolean): { section: string; links: Link[] }[] {
  const sections = [
    {
      section: 'Direct tables (PostgREST\u2019s interface)',
      links: [
        {
          path: '/rest/v1/',
          what:
            'OpenAPI of what your role may use; send the apikey header. Swagger 2.0, or 3.1 (writes and rpc/* too) ' +
            'with Accept: application/vnd.oai.openapi+json',
        },
      ],
    },
    {
      section: 'Health',
      links: [
        { path: '/healthz', what: 'the process is up' },
        { path: '/readyz', what: 'a pooled database connection answers' },
      ],
    },
  ];
  if (!app) return sections;
  return [
    {
      section: 'REST wrapper',
      links: [
        { path: '/api/v1/docs/', what: 'API reference (Swagger UI)' },
        { path: '/api/v1/openapi.json', what: 'OpenAPI 3.1, with the live category and method lists' },
        { path: '/api/v1/token', what: 'POST a workspace token here for a one-hour access token' },
      ],
    },
    ...sections,
    {
      section: 'AI agents and people',
      links: [
        { path: '/mcp?token=', what: 'the MCP server (Streamable HTTP); the workspace token goes after token=' },
        { path: '/settings', what: 'workspace settings: tokens and the API switch' },
      ],
    },
  ];
}

const page = (app: boolean): string =>
  [
    '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Tally</title>',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    '<style>body{font:16px/1.5 system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem;color:#222}',
    'code{background:#f3f3f3;padding:0 .2em}h2{font-size:1.1rem;margin-top:1.6rem}</style></head><body>',
    '<h1>Tally</h1>',
    '<p>A workspace finance service: expenses, group funds, fund transactions and contacts, for programs and AI agents. ',
    'The README of the repository walks through a first request; every error answers with a hint.</p>',
    ...links(app).flatMap(({ section, links: items }) => [
      `<h2>${section}</h2><ul>`,
      ...items.map(({ path, what }) =>
        path.includes('?') || path === '/api/v1/token'
          ? `<li><code>${path}</code> \u2014 ${what}</li>`
          : `<li><a href="${path}"><code>${path}</code></a> \u2014 ${what}</li>`,
      ),
      '</ul>',
    ]),
    '</body></html>',
  ].join('');

/** GET / (and HEAD): the landing page. `app`: the finance app's surfaces are served. */
export function homeRouter(app: boolean): Router {
  const router = Router();
  const html = page(app);
  const json = JSON.stringify({
    name: 'tally',
    surfaces: Object.fromEntries(
      links(app).map(({ section, links: items }) => [section, items.map(({ path, what }) => ({ path, what }))]),
    ),
  });
  router.get('/', (req, res) => {
    res.set('Cache-Control', 'no-cache');
    if (req.accepts(['application/json', 'text/html']) === 'text/html' && (req.get('accept') ?? '').includes('html')) {
      res
        .set(
          'Content-Security-Policy',
          "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        )
        .type('html')
        .send(html);
    } else {
      res.type('json').send(json);
    }
  });
  return router;
}
