"""Chat templates shaped like two guard LLMs' own, for tiny in-process judges. They are written for these tests
(the models' template files are not copied in): each keeps the structure the judge depends on, with placeholder
wording. What the real templates do was checked once against copies of them (2026-11-26; docs/classifiers.md):

* :data:`SHIELDGEMMA_SHAPED`: google/shieldgemma's template renders ``bos_token``, the user turn between
  ``<start_of_turn>``/``<end_of_turn>`` as ``Human Question: ...``, the policy from the ``guideline`` variable as a
  ``* ...`` line, a question whose answer starts with Yes or No, and a blank line; it has no model turn and ignores
  ``add_generation_prompt``, so the decision is the token right after the prompt.
* :data:`GRANITE_GUARDIAN_31_SHAPED`: ibm-granite/granite-guardian-3.0 to 3.2 take ``guardian_config`` with a
  ``risk_name`` looked up in the template's own risk bank, render the user turn as ``User Message: ...`` inside
  ``<|start_of_role|>user<|end_of_role|> ... <|end_of_text|>``, and end with the assistant role as the generation
  prompt; the model answers Yes or No right after it.
* :data:`GRANITE_GUARDIAN_33_SHAPED`: ibm-granite/granite-guardian-3.3-8b takes ``guardian_config`` with a
  ``criteria_id`` looked up in its criteria bank and a ``think`` flag; it renders a system turn, the user turn
  inside ``<|start_of_role|>user<|end_of_role|> ... <|end_of_text|>``, a ``judge_protocol`` turn with the criteria
  and a scoring schema, and as the generation prompt the ``judge{no_think}`` (or ``judge{think}``) role; the model
  answers ``<score> yes </score>`` (after a ``<think>`` block when thinking). Checked against IBM's published
  description of the template (ibm-granite/gguf, 2026-11-26), not a copy of the model's tokenizer config.
"""

SHIELDGEMMA_SHAPED = (
    "{{- bos_token }}"
    "{{- 'Placeholder preamble of a policy judge.\\n\\n' }}"
    "{{- '<start_of_turn>\\n' }}"
    "{{- 'Human Question: ' + messages[-1].content }}"
    "{{- '\\n<end_of_turn>\\n\\n' }}"
    "{{- 'Placeholder principle heading:\\n\\n' }}"
    "{{- '* ' + guideline + '\\n' }}"
    "{{- '\\n===\\n\\n' }}"
    "{{- 'Placeholder question? Start the answer with Yes or No.\\n\\n' }}"
)

GRANITE_GUARDIAN_31_SHAPED = (
    "{%- set risk_bank = {'social_bias': 'Placeholder definition of the social bias risk.',"
    " 'harm': 'Placeholder definition of the general harm risk.'} %}"
    "{%- set risk = risk_bank[guardian_config['risk_name']] %}"
    "{{- '<|start_of_role|>user<|end_of_role|>Placeholder instruction.\\n\\n<start_of_turn>\\nUser Message: ' }}"
    "{{- messages[-1].content + '\\n<end_of_turn>\\n\\nPlaceholder risk heading:\\n<start_of_risk_definition>\\n- ' }}"
    "{{- risk + '\\n<end_of_risk_definition>\\n\\nPlaceholder question? Answer either Yes or No.<|end_of_text|>\\n' }}"
    "{%- if add_generation_prompt %}{{- '<|start_of_role|>assistant<|end_of_role|>' }}{%- endif %}"
)

GRANITE_GUARDIAN_33_SHAPED = (
    "{%- set criteria_bank = {'social_bias': 'Placeholder definition of the social bias criteria.',"
    " 'harm': 'Placeholder definition of the general harm criteria.'} %}"
    "{{- '<|start_of_role|>system<|end_of_role|>Placeholder judge instruction.<|end_of_text|>\\n' }}"
    "{{- '<|start_of_role|>user<|end_of_role|>' + messages[-1].content + '<|end_of_text|>\\n' }}"
    "{{- '<|start_of_role|>judge_protocol<|end_of_role|>### Criteria: ' }}"
    "{{- criteria_bank[guardian_config['criteria_id']] + '\\n\\n### Scoring Schema: Placeholder schema, yes or no.' }}"
    "{{- '<|end_of_text|>\\n' }}"
    "{%- if add_generation_prompt %}"
    "{{- '<|start_of_role|>judge{' + ('think' if think else 'no_think') + '}<|end_of_role|>' }}"
    "{%- endif %}"
)
