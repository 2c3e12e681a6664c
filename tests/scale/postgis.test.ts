import { TEST_API_KEY } from '../harness/rest.js';
import { startServers, type Servers } from '../harness/servers.js';
import { postgisMissing, startPgBouncer, type PgBouncerSetup } from './harness/pgbouncer.js';

// GeoJSON output (`Accept: application/geo+json`), as PostgREST gives it: a FeatureCollection of
// PostGIS's ST_AsGeoJSON of each row. The embedded Postgres of the main suite has no PostGIS, so
// this runs on Debian's PostgreSQL 15 with Debian's PostGIS package, which the scale suite
// installs with apt; without it the file is skipped and says why.

const lacking = postgisMissing();
if (lacking) console.warn(`tests/scale/postgis.test.ts skipped: ${lacking}`);

const GEO = 'application/geo+json; charset=utf-8';
const point = (x: number, y: number) => ({ type: 'Point', coordinates: [x, y] });

(lacking ? describe.skip : describe)('GeoJSON output on a schema with PostGIS geometries', () => {
  let pg: PgBouncerSetup;
  let servers: Servers;

  beforeAll(async () => {
    pg = await startPgBouncer();
    await pg.admin.begin(async (tx) => {
      await tx`CREATE EXTENSION postgis`;
      await tx`CREATE SCHEMA geo`;
      await tx`CREATE ROLE geo_anon NOLOGIN`;
      await tx`GRANT geo_anon TO authenticator`;
      await tx`CREATE TABLE geo.depots (id int PRIMARY KEY, label text NOT NULL, spot geometry(Point, 4326))`;
      await tx`CREATE TABLE geo.sensors (
        id int PRIMARY KEY, depot_id int REFERENCES geo.depots (id), reach geometry(Polygon, 4326))`;
      await tx`CREATE TABLE geo.plain (id int PRIMARY KEY, label text)`;
      await tx`CREATE FUNCTION geo.depot(id int) RETURNS SETOF geo.depots LANGUAGE sql STABLE
        AS 'SELECT * FROM geo.depots WHERE depots.id = depot.id'`;
      await tx`INSERT INTO geo.depots VALUES
        (1, 'north', 'SRID=4326;POINT(10.5 59.25)'), (2, 'south', 'SRID=4326;POINT(-3.75 40.5)')`;
      await tx`INSERT INTO geo.sensors VALUES (1, 1, 'SRID=4326;POLYGON((0 0, 1 0, 1 1, 0 0))')`;
      await tx`INSERT INTO geo.plain VALUES (1, 'no geometry')`;
      await tx`GRANT USAGE ON SCHEMA geo TO geo_anon`;
      await tx`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA geo TO geo_anon`;
    });
    servers = await startServers(
      1,
      pg.ownerUrl,
      {
        TALLY_PUBLISHABLE_KEYS: TEST_API_KEY,
        TALLY_DB_SCHEMAS: 'geo',
        TALLY_DB_ANON_ROLE: 'geo_anon',
        TALLY_DB_API_ROLES: 'anon,api_read,api_write,geo_anon',
        TALLY_DB_PRE_REQUEST: '',
      },
      pg.directUrl,
    );
  });
  afterAll(async () => {
    await servers?.close();
    await pg?.stop();
  });

  const send = (path: string, init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}) =>
    fetch(`${servers.bases[0]}/rest/v1/${path}`, {
      method: init.method ?? 'GET',
      headers: {
        apikey: TEST_API_KEY,
        accept: 'application/geo+json',
        ...(init.body === undefined ? {} : { 'content-type': 'application/json' }),
        ...init.headers,
      },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });

  it('answers a table with a geometry column as a FeatureCollection, the other columns as properties', async () => {
    const res = await send('depots?order=id');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe(GEO);
    expect(await res.json()).toEqual({
      type: 'FeatureCollection',
      features: [
        { type: 'Feature', geometry: point(10.5, 59.25), properties: { id: 1, label: 'north' } },
        { type: 'Feature', geometry: point(-3.75, 40.5), properties: { id: 2, label: 'south' } },
      ],
    });
  });

  it('gives no features for no rows, and takes the geometry a select names', async () => {
    const none = await send('depots?id=gt.9');
    expect(await none.json()).toEqual({ type: 'FeatureCollection', features: [] });
    const picked = await send('sensors?select=id,reach');
    expect(await picked.json()).toEqual({
      type: 'FeatureCollection',
      features: [
        {
          type: 'Feature',
          geometry: {
            type: 'Polygon',
            coordinates: [
              [
                [0, 0],
                [1, 0],
                [1, 1],
                [0, 0],
              ],
            ],
          },
          properties: { id: 1 },
        },
      ],
    });
  });

  it("refuses a table without a geometry column with PostGIS's 400", async () => {
    const res = await send('plain');
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ code: '22023', message: 'geometry column is missing' });
  });

  it('answers functions and writes with return=representation in GeoJSON', async () => {
    const called = await send('rpc/depot?id=2');
    expect(((await called.json()) as { features: unknown[] }).features).toEqual([
      { type: 'Feature', geometry: point(-3.75, 40.5), properties: { id: 2, label: 'south' } },
    ]);
    const created = await send('depots', {
      method: 'POST',
      body: { id: 3, label: 'east', spot: 'SRID=4326;POINT(30 10)' },
      headers: { prefer: 'return=representation' },
    });
    expect(created.status).toBe(201);
    expect(created.headers.get('content-type')).toBe(GEO);
    expect(await created.json()).toEqual({
      type: 'FeatureCollection',
      features: [{ type: 'Feature', geometry: point(30, 10), properties: { id: 3, label: 'east' } }],
    });
    const [row] = await pg.admin`SELECT ST_AsText(spot) AS spot FROM geo.depots WHERE id = 3`;
    expect(row?.spot).toBe('POINT(30 10)');
  });

  it("gives a geometry as GeoJSON inside plain JSON too (PostGIS's cast to json)", async () => {
    const res = await send('depots?id=eq.1', { headers: { accept: 'application/json' } });
    expect(await res.json()).toEqual([
      {
        id: 1,
        label: 'north',
        spot: { type: 'Point', crs: { type: 'name', properties: { name: 'EPSG:4326' } }, coordinates: [10.5, 59.25] },
      },
    ]);
  });
});
