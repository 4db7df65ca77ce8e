"""People and their own judges: review items and their labels, code scorers' results, and
versioned evaluation sets.

Labels and evaluation set versions are append-only, like alias moves: a relabel is a new
label, a changed set a new version.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
UUID = sa.Uuid()
TIME = sa.DateTime(timezone=True)
APPEND_ONLY = ("review_label", "evaluation_set")


def upgrade() -> None:
    _review_item()
    _review_label()
    _evaluation_set()
    _scorer_result()
    for table in APPEND_ONLY:
        _refuse_changes(table)


def _review_item() -> None:
    op.create_table(
        "review_item",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=True),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("key", sa.String(length=400), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("title", sa.String(), nullable=False),
        sa.Column("body", JSON, nullable=False),
        sa.Column("subject", JSON, nullable=False),
        sa.Column("evidence", JSON, nullable=False),
        sa.Column("assignee", sa.String(length=200), nullable=True),
        sa.Column("skipped_by", JSON, nullable=False),
        sa.Column("closed_reason", sa.String(), nullable=True),
        sa.Column("mirror", JSON, nullable=True),
        sa.Column("created_at", TIME, nullable=False),
        sa.Column("updated_at", TIME, nullable=False),
        sa.ForeignKeyConstraint(["agent"], ["agent.name"], name=op.f("fk_review_item_agent_agent")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_review_item")),
        sa.UniqueConstraint("agent", "kind", "key", name=op.f("uq_review_item_agent_kind_key")),
    )
    op.create_index(
        "ix_review_item_status_agent", "review_item", ["status", "agent", "id"], unique=False
    )


def _review_label() -> None:
    op.create_table(
        "review_label",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("reviewer", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("label", sa.String(length=64), nullable=True),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("note", sa.String(), nullable=False),
        sa.Column("effects", JSON, nullable=False),
        sa.Column("via", sa.String(length=16), nullable=False),
        sa.Column("created_at", TIME, nullable=False),
        sa.ForeignKeyConstraint(
            ["item_id"], ["review_item.id"], name=op.f("fk_review_label_item_id_review_item")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_review_label")),
    )
    op.create_index("ix_review_label_item", "review_label", ["item_id", "id"], unique=False)


def _evaluation_set() -> None:
    op.create_table(
        "evaluation_set",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("parent_id", sa.String(length=200), nullable=True),
        sa.Column("cases", JSON, nullable=False),
        sa.Column("author", sa.String(length=200), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("created_at", TIME, nullable=False),
        sa.ForeignKeyConstraint(
            ["agent"], ["agent.name"], name=op.f("fk_evaluation_set_agent_agent")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_evaluation_set")),
        sa.UniqueConstraint(
            "agent", "name", "content_hash", name=op.f("uq_evaluation_set_agent_name_content_hash")
        ),
        sa.UniqueConstraint(
            "agent", "name", "number", name=op.f("uq_evaluation_set_agent_name_number")
        ),
    )


def _scorer_result() -> None:
    op.create_table(
        "scorer_result",
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("scorer", sa.String(length=64), nullable=False),
        sa.Column("trajectory_id", UUID, nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("reward_id", UUID, nullable=True),
        sa.Column("error", sa.String(), nullable=True),
        sa.Column("updated_at", TIME, nullable=False),
        sa.ForeignKeyConstraint(
            ["agent"], ["agent.name"], name=op.f("fk_scorer_result_agent_agent")
        ),
        sa.PrimaryKeyConstraint("agent", "scorer", "trajectory_id", name=op.f("pk_scorer_result")),
    )
    op.create_index(
        "ix_scorer_result_agent_scorer_status",
        "scorer_result",
        ["agent", "scorer", "status"],
        unique=False,
    )


def _refuse_changes(table: str) -> None:
    """UPDATE and DELETE refused by the database, whoever the writer (as in 0008)."""
    dialect = op.get_bind().dialect.name
    for statement in ("UPDATE", "DELETE"):
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


def downgrade() -> None:
    on = " ON {}" if op.get_bind().dialect.name == "postgresql" else ""
    for table in APPEND_ONLY:
        for statement in ("update", "delete"):
            op.execute(f"DROP TRIGGER IF EXISTS {table}_refuse_{statement}{on.format(table)}")
    op.drop_index("ix_scorer_result_agent_scorer_status", table_name="scorer_result")
    op.drop_table("scorer_result")
    op.drop_table("evaluation_set")
    op.drop_index("ix_review_label_item", table_name="review_label")
    op.drop_table("review_label")
    op.drop_index("ix_review_item_status_agent", table_name="review_item")
    op.drop_table("review_item")
