"""The package's boundary models, defined with the other models in agent/models/statements.py."""
from agent.models.financials import (
    CONCEPTS,
    ColumnValue,
    Computation,
    Fact,
    Input,
    MeasureQuery,
    Statement,
    StatementLine,
    Unit,
)

__all__ = ["CONCEPTS", "ColumnValue", "Computation", "Fact", "Input", "MeasureQuery", "Statement", "StatementLine", "Unit"]
