package engine

import (
	"context"

	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/postgres"
)

// pgSchemaVersion is the PostgreSQL schema version this build uses.
const pgSchemaVersion = postgres.SchemaVersion

func openPostgres(ctx context.Context, u string) (store.Store, error) {
	st, err := postgres.Open(ctx, u, nil)
	if err != nil {
		return nil, err
	}
	return st, nil
}
