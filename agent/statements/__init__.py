"""Financial statements as data: line items read from statement pages, stored per concept and period, and the
calculator that computes an analyst's measures from them with every input cited."""
