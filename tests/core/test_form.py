from __future__ import annotations

import pytest

from gateway.core.form import Form, choose_form, pages_for_good


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


@pytest.mark.parametrize(("raw", "budget", "for_good"), [(4001, 4000, True), (900, 4000, False), (4000, 4000, False)])
def test_only_a_history_that_outgrew_the_budget_makes_its_thread_paged_for_good(raw: int, budget: int, for_good: bool) -> None:
    # (900 in 4000: paged only because paging made it smaller; the next request decides afresh)
    assert pages_for_good(raw_tokens=raw, budget=budget) is for_good
