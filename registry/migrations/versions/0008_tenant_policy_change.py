"""Tenant policy changes: who changed a tenant's policy, when, why, and to what (append-only).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
TABLE = "tenant_policy_change"


def upgrade() -> None:
    op.create_table(
        TABLE,
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("policy", JSON, nullable=False),
        sa.Column("changed", JSON, nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant"], ["tenant.name"], name=op.f("fk_tenant_policy_change_tenant_tenant")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tenant_policy_change")),
    )
    op.create_index(
        "ix_tenant_policy_change_tenant_at", TABLE, ["tenant", "at", "id"], unique=False
    )
    # Append-only, like alias moves (the function exists since 0001 on PostgreSQL).
    dialect = op.get_bind().dialect.name
    for statement in ("UPDATE", "DELETE"):
        name = f"{TABLE}_refuse_{statement.lower()}"
        if dialect == "postgresql":
            op.execute(
                f"CREATE TRIGGER {name} BEFORE {statement} ON {TABLE} "
                "FOR EACH ROW EXECUTE FUNCTION evoplane_refuse_change()"
            )
        else:
            op.execute(
                f"CREATE TRIGGER {name} BEFORE {statement} ON {TABLE} BEGIN "
                f"SELECT RAISE(ABORT, '{TABLE} rows are immutable ({statement} refused); "
                "append a new row instead'); END"
            )


def downgrade() -> None:
    on = f" ON {TABLE}" if op.get_bind().dialect.name == "postgresql" else ""
    for statement in ("UPDATE", "DELETE"):
        op.execute(f"DROP TRIGGER IF EXISTS {TABLE}_refuse_{statement.lower()}{on}")
    op.drop_index("ix_tenant_policy_change_tenant_at", table_name=TABLE)
    op.drop_table(TABLE)
