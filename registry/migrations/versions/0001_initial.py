"""Initial registry schema: tenants, agents, versions, aliases, trajectories, events, rewards.

Revision ID: 0001
Revises:
Create Date: 2026-11-30

Immutability is enforced in the database itself: agent versions and alias history can
be neither updated nor deleted, events and rewards cannot be updated (retention may
delete them). Any writer, not only this package, gets the same guarantee.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
TIMESTAMP = sa.DateTime(timezone=True)

# table -> statements refused on it
IMMUTABLE = {
    "agent_version": ("UPDATE", "DELETE"),
    "alias_event": ("UPDATE", "DELETE"),
    "event": ("UPDATE",),
    "reward": ("UPDATE",),
}

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agent",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("description", sa.String(), nullable=False),
        sa.Column("settings", JSON, nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_agent")),
    )
    op.create_table(
        "tenant",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("policy", JSON, nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_tenant")),
    )
    op.create_table(
        "agent_version",
        sa.Column("id", sa.String(length=80), nullable=False),
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("parent_id", sa.String(length=80), nullable=True),
        sa.Column("spec", JSON, nullable=False),
        sa.Column("author", sa.String(length=200), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["agent"], ["agent.name"], name=op.f("fk_agent_version_agent_agent")
        ),
        sa.ForeignKeyConstraint(
            ["parent_id"],
            ["agent_version.id"],
            name=op.f("fk_agent_version_parent_id_agent_version"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agent_version")),
        sa.UniqueConstraint(
            "agent", "content_hash", name=op.f("uq_agent_version_agent_content_hash")
        ),
        sa.UniqueConstraint("agent", "number", name=op.f("uq_agent_version_agent_number")),
    )
    op.create_table(
        "api_key",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("agents", JSON, nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("revoked_at", TIMESTAMP, nullable=True),
        sa.ForeignKeyConstraint(["tenant"], ["tenant.name"], name=op.f("fk_api_key_tenant_tenant")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_key")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_key_key_hash")),
    )
    with op.batch_alter_table("api_key", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_api_key_tenant"), ["tenant"], unique=False)

    op.create_table(
        "evolution",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("scope", JSON, nullable=False),
        sa.Column("options", JSON, nullable=False),
        sa.Column("action", sa.String(length=32), nullable=True),
        sa.Column("stage", sa.String(length=32), nullable=False),
        sa.Column("outcome", sa.String(length=32), nullable=True),
        sa.Column("decision", JSON, nullable=True),
        sa.Column("stages", JSON, nullable=False),
        sa.Column("parent_version_id", sa.String(length=80), nullable=True),
        sa.Column("candidate_version_id", sa.String(length=80), nullable=True),
        sa.Column("workflow_run_id", sa.String(length=200), nullable=True),
        sa.Column("mlflow_run_id", sa.String(length=200), nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(["agent"], ["agent.name"], name=op.f("fk_evolution_agent_agent")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_evolution")),
    )
    with op.batch_alter_table("evolution", schema=None) as batch_op:
        batch_op.create_index("ix_evolution_agent_created", ["agent", "created_at"], unique=False)

    op.create_table(
        "memory_item",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=True),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("key", sa.String(length=400), nullable=False),
        sa.Column("content", sa.String(), nullable=False),
        sa.Column("provenance", JSON, nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("conflicts_with", sa.Uuid(), nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(["agent"], ["agent.name"], name=op.f("fk_memory_item_agent_agent")),
        sa.ForeignKeyConstraint(
            ["tenant"], ["tenant.name"], name=op.f("fk_memory_item_tenant_tenant")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memory_item")),
    )
    with op.batch_alter_table("memory_item", schema=None) as batch_op:
        batch_op.create_index(
            "ix_memory_item_agent_tenant_key", ["agent", "tenant", "key"], unique=False
        )

    op.create_table(
        "tenant_agent",
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["agent"], ["agent.name"], name=op.f("fk_tenant_agent_agent_agent")
        ),
        sa.ForeignKeyConstraint(
            ["tenant"], ["tenant.name"], name=op.f("fk_tenant_agent_tenant_tenant")
        ),
        sa.PrimaryKeyConstraint("tenant", "agent", name=op.f("pk_tenant_agent")),
    )
    op.create_table(
        "trajectory",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("session", sa.String(length=200), nullable=False),
        sa.Column("task_type", sa.String(length=200), nullable=True),
        sa.Column("version_id", sa.String(length=80), nullable=True),
        sa.Column("versions", JSON, nullable=False),
        sa.Column("started_at", TIMESTAMP, nullable=False),
        sa.Column("ended_at", TIMESTAMP, nullable=True),
        sa.Column("outcome_status", sa.String(length=16), nullable=True),
        sa.Column("outcome", JSON, nullable=True),
        sa.Column("atdp_version", sa.String(length=8), nullable=False),
        sa.ForeignKeyConstraint(["agent"], ["agent.name"], name=op.f("fk_trajectory_agent_agent")),
        sa.ForeignKeyConstraint(
            ["tenant"], ["tenant.name"], name=op.f("fk_trajectory_tenant_tenant")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_trajectory")),
    )
    with op.batch_alter_table("trajectory", schema=None) as batch_op:
        batch_op.create_index("ix_trajectory_agent_started", ["agent", "started_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_trajectory_session"), ["session"], unique=False)
        batch_op.create_index(
            "ix_trajectory_tenant_agent_started", ["tenant", "agent", "started_at"], unique=False
        )

    op.create_table(
        "alias_event",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("alias", sa.String(length=16), nullable=False),
        sa.Column("version_id", sa.String(length=80), nullable=True),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("evolution_id", sa.String(length=200), nullable=True),
        sa.Column("at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(["agent"], ["agent.name"], name=op.f("fk_alias_event_agent_agent")),
        sa.ForeignKeyConstraint(
            ["version_id"],
            ["agent_version.id"],
            name=op.f("fk_alias_event_version_id_agent_version"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alias_event")),
    )
    with op.batch_alter_table("alias_event", schema=None) as batch_op:
        batch_op.create_index(
            "ix_alias_event_agent_alias_at", ["agent", "alias", "at", "id"], unique=False
        )

    op.create_table(
        "event",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("trajectory_id", sa.Uuid(), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("parent_id", sa.Uuid(), nullable=True),
        sa.Column("traffic", sa.String(length=16), nullable=False),
        sa.Column("training", sa.String(length=16), nullable=False),
        sa.Column("replay_class", sa.String(length=16), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("expires_at", TIMESTAMP, nullable=True),
        sa.Column("body", JSON, nullable=False),
        sa.ForeignKeyConstraint(["tenant"], ["tenant.name"], name=op.f("fk_event_tenant_tenant")),
        sa.ForeignKeyConstraint(
            ["trajectory_id"], ["trajectory.id"], name=op.f("fk_event_trajectory_id_trajectory")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_event")),
        sa.UniqueConstraint("trajectory_id", "seq", name=op.f("uq_event_trajectory_id_seq")),
    )
    with op.batch_alter_table("event", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_event_expires_at"), ["expires_at"], unique=False)
        batch_op.create_index("ix_event_tenant_created", ["tenant", "created_at"], unique=False)

    op.create_table(
        "reward",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("trajectory_id", sa.Uuid(), nullable=False),
        sa.Column("event_id", sa.Uuid(), nullable=True),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("value_kind", sa.String(length=16), nullable=False),
        sa.Column("value_num", sa.Float(), nullable=True),
        sa.Column("value_label", sa.String(), nullable=True),
        sa.Column("critique", sa.String(), nullable=True),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(["event_id"], ["event.id"], name=op.f("fk_reward_event_id_event")),
        sa.ForeignKeyConstraint(["tenant"], ["tenant.name"], name=op.f("fk_reward_tenant_tenant")),
        sa.ForeignKeyConstraint(
            ["trajectory_id"], ["trajectory.id"], name=op.f("fk_reward_trajectory_id_trajectory")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_reward")),
    )
    with op.batch_alter_table("reward", schema=None) as batch_op:
        batch_op.create_index("ix_reward_event", ["event_id"], unique=False)
        batch_op.create_index(
            "ix_reward_tenant_trajectory", ["tenant", "trajectory_id"], unique=False
        )

    _create_immutability_triggers()


def _create_immutability_triggers() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        op.execute(
            """
            CREATE OR REPLACE FUNCTION evoplane_refuse_change() RETURNS trigger AS $$
            BEGIN
                RAISE EXCEPTION '% rows are immutable (% refused); append a new row instead',
                    TG_TABLE_NAME, TG_OP USING ERRCODE = 'integrity_constraint_violation';
            END;
            $$ LANGUAGE plpgsql
            """
        )
    for table, statements in IMMUTABLE.items():
        for statement in statements:
            name = f"{table}_refuse_{statement.lower()}"
            if dialect == "postgresql":
                op.execute(
                    f"CREATE TRIGGER {name} BEFORE {statement} ON {table} "
                    "FOR EACH ROW EXECUTE FUNCTION evoplane_refuse_change()"
                )
            else:
                op.execute(
                    f"CREATE TRIGGER {name} BEFORE {statement} ON {table} BEGIN "
                    f"SELECT RAISE(ABORT, '{table} rows are immutable ({statement} refused); "
                    "append a new row instead'); END"
                )


def _drop_immutability_triggers() -> None:
    dialect = op.get_bind().dialect.name
    for table, statements in IMMUTABLE.items():
        for statement in statements:
            name = f"{table}_refuse_{statement.lower()}"
            op.execute(
                f"DROP TRIGGER IF EXISTS {name}"
                + (f" ON {table}" if dialect == "postgresql" else "")
            )
    if dialect == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS evoplane_refuse_change()")


def downgrade() -> None:
    _drop_immutability_triggers()
    with op.batch_alter_table("reward", schema=None) as batch_op:
        batch_op.drop_index("ix_reward_tenant_trajectory")
        batch_op.drop_index("ix_reward_event")

    op.drop_table("reward")
    with op.batch_alter_table("event", schema=None) as batch_op:
        batch_op.drop_index("ix_event_tenant_created")
        batch_op.drop_index(batch_op.f("ix_event_expires_at"))

    op.drop_table("event")
    with op.batch_alter_table("alias_event", schema=None) as batch_op:
        batch_op.drop_index("ix_alias_event_agent_alias_at")

    op.drop_table("alias_event")
    with op.batch_alter_table("trajectory", schema=None) as batch_op:
        batch_op.drop_index("ix_trajectory_tenant_agent_started")
        batch_op.drop_index(batch_op.f("ix_trajectory_session"))
        batch_op.drop_index("ix_trajectory_agent_started")

    op.drop_table("trajectory")
    op.drop_table("tenant_agent")
    with op.batch_alter_table("memory_item", schema=None) as batch_op:
        batch_op.drop_index("ix_memory_item_agent_tenant_key")

    op.drop_table("memory_item")
    with op.batch_alter_table("evolution", schema=None) as batch_op:
        batch_op.drop_index("ix_evolution_agent_created")

    op.drop_table("evolution")
    with op.batch_alter_table("api_key", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_api_key_tenant"))

    op.drop_table("api_key")
    op.drop_table("agent_version")
    op.drop_table("tenant")
    op.drop_table("agent")
