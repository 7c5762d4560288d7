# The worker image used by docker-compose.yml: the order example app's worker on the package's sources
# (tsx resolves `reservation-saga` through tsconfig.json's paths, as in a development checkout).
FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY scripts ./scripts
COPY lua ./lua
COPY migrations ./migrations
COPY examples/orders ./examples/orders
RUN npm run build
USER node
CMD ["node", "--import", "tsx", "examples/orders/src/worker.ts"]
