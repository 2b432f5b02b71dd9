"""A mixed-integer program for HiGHS (through highspy), built column by
column and row by row: the exact solver behind the benchmarks' optima
(bench/peer_optimum.py, bench/testbed/optimum.py)."""

from dataclasses import dataclass, field

import highspy
import numpy as np


@dataclass
class Program:
    """A mixed-integer program built column by column and row by row."""

    cost: list[float] = field(default_factory=list)
    lower: list[float] = field(default_factory=list)
    upper: list[float] = field(default_factory=list)
    integer: list[bool] = field(default_factory=list)
    rows: list[tuple[list[int], list[float], float, float]] = field(default_factory=list)

    def column(self, upper: float, cost: float = 0.0, integer: bool = True) -> int:
        self.cost.append(cost)
        self.lower.append(0.0)
        self.upper.append(upper)
        self.integer.append(integer)
        return len(self.cost) - 1

    def row(self, terms: dict[int, float], low: float, high: float) -> None:
        self.rows.append((list(terms), list(terms.values()), low, high))

    def solve(
        self, seconds: float, start: tuple[np.ndarray, np.ndarray] | None = None
    ) -> tuple[np.ndarray, float, float, bool]:
        """The best values found, their objective, the bound, and whether
        they are proven best; ``start``: columns and values to begin from."""
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = len(self.cost), len(self.rows)
        lp.col_cost_, lp.col_lower_, lp.col_upper_ = self.cost, self.lower, self.upper
        lp.row_lower_ = [r[2] for r in self.rows]
        lp.row_upper_ = [r[3] for r in self.rows]
        starts, index, value = [0], [], []
        for columns, values, _, _ in self.rows:
            index += columns
            value += values
            starts.append(len(index))
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = starts, index, value
        lp.integrality_ = [
            highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous
            for i in self.integer
        ]
        solver = highspy.Highs()
        solver.setOptionValue("output_flag", False)
        solver.setOptionValue("time_limit", seconds)
        solver.setOptionValue("threads", 1)
        solver.setOptionValue("random_seed", 0)
        solver.passModel(lp)
        if start is not None:
            columns, values = start
            solver.setSolution(
                columns.size, columns.ravel().astype(np.int32), values.ravel().astype(float)
            )
        solver.run()
        status = solver.getModelStatus()
        if solver.getInfo().primal_solution_status != 2:  # kSolutionStatusFeasible
            raise RuntimeError(
                f"no placement meets the rules: {solver.modelStatusToString(status)}"
            )
        info = solver.getInfo()
        values = np.array(solver.getSolution().col_value)
        optimal = status == highspy.HighsModelStatus.kOptimal
        return values, info.objective_function_value, info.mip_dual_bound, optimal
