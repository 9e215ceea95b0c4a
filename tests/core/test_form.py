from __future__ import annotations

import pytest

from gateway.core.form import Form, choose_form


@pytest.mark.parametrize(
    ("raw", "paged", "budget", "before", "form"),
    [
        (800, 1360, 4000, False, Form.RAW),  # a short chat: paging would cost more than the chat itself
        (1000, 1000, 1000, False, Form.RAW),  # as large as the paged form and the budget: still raw
        (4001, 1360, 4000, False, Form.PAGED),  # the history no longer fits
        (900, 850, 4000, False, Form.PAGED),  # paging makes it smaller
        (800, 1360, 4000, True, Form.PAGED),  # once paged, always paged
    ],
)
def test_the_form_of_a_request(raw: int, paged: int, budget: int, before: bool, form: Form) -> None:
    assert choose_form(raw_tokens=raw, paged_tokens=paged, budget=budget, paged_before=before) is form
