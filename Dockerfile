# The worker image used by docker-compose.yml.
FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY scripts ./scripts
COPY lua ./lua
COPY migrations ./migrations
RUN npm run build && npm prune --omit=dev
USER node
CMD ["node", "dist/src/worker.js"]
