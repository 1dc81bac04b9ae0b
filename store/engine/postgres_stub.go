package engine

import (
	"context"

	"github.com/openplaybook/openplaybook/store"
)

// Until store/postgres is merged.
const pgSchemaVersion = 0

func openPostgres(ctx context.Context, u string) (store.Store, error) { return nil, errNoPostgres }
